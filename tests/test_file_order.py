"""tests/file_order.py: on an xdist worker the files come longest first (those that wait on a load
run last), each file's tests together, its Chromium tests last; `--store-file-seconds` records what
each file took."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests import file_order
from tests.file_order import longest_files_first

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: tuple[str, ...] = ()
    module: object = None


def order(items: list[FakeItem], seconds: dict[str, float]) -> list[str]:
    return [item.nodeid for item in longest_files_first(cast(Any, items), seconds)]


def test_files_come_longest_first_each_whole_with_its_chromium_tests_last() -> None:
    items = [
        FakeItem("a.py::one"),
        FakeItem("a.py::two"),
        FakeItem("b.py::page", ("chromium",)),
        FakeItem("b.py::plain"),
        FakeItem("b.py::other"),
        FakeItem("c.py::one"),
    ]

    assert order(items, {"a.py": 1.0, "b.py": 90.0, "c.py": 5.0}) == [
        "b.py::plain", "b.py::other", "b.py::page", "c.py::one", "a.py::one", "a.py::two",
    ]  # fmt: skip


def test_a_file_not_in_the_table_is_weighed_by_its_count_and_ties_keep_collection_order() -> None:
    items = [FakeItem("old.py::one"), *(FakeItem(f"new.py::t{i}") for i in range(10)), FakeItem("tie.py::one")]

    # new.py: 10 tests at 0.5 s, heavier than old.py's 2 s; tie.py's 2 s comes after old.py's.
    assert order(items, {"old.py": 2.0, "tie.py": 2.0})[:2] == ["new.py::t0", "new.py::t1"]
    assert order(items, {"old.py": 2.0, "tie.py": 2.0})[-2:] == ["old.py::one", "tie.py::one"]


def test_the_files_that_wait_on_a_load_run_come_last_whatever_their_seconds() -> None:
    loads = SimpleNamespace(LOAD_RUN=object())
    items = [
        FakeItem("runner.py::one", module=loads),
        FakeItem("runner.py::two", module=loads),
        FakeItem("multirun.py::one", module=loads),
        FakeItem("short.py::one", module=SimpleNamespace()),
        FakeItem("long.py::one"),
    ]

    assert order(items, {"runner.py": 250.0, "multirun.py": 300.0, "short.py": 1.0, "long.py": 9.0}) == [
        "long.py::one", "short.py::one", "multirun.py::one", "runner.py::one", "runner.py::two",
    ]  # fmt: skip


def test_the_seconds_of_each_file_are_stored_and_the_workers_get_them_in_that_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_quick="def test_quick():\n    pass\n",
        test_slow="import time\n\ndef test_slow():\n    time.sleep(0.3)\n",
    )
    table = pytester.path / "seconds.json"
    options = ["-p", "no:django", "-p", "no:asyncio", f"--file-seconds={table}"]

    pytester.runpytest(*options, "--store-file-seconds", plugins=[file_order]).assert_outcomes(passed=2)
    seconds = json.loads(table.read_text())
    assert set(seconds) == {"test_quick.py", "test_slow.py"}
    assert seconds["test_slow.py"] >= 0.3 > seconds["test_quick.py"]

    # Collected alone, the quick file comes first; a worker gets the slow one first.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess("-p", "tests.file_order", *options, "-n", "1", "--dist", "loadfile", "-v")
    result.assert_outcomes(passed=2)
    ran = [line.split()[-1] for line in result.outlines if "PASSED" in line]
    assert ran == ["test_slow.py::test_slow", "test_quick.py::test_quick"]
