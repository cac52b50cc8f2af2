"""Pytest plugin: on xdist workers the test files are collected longest first (enabled in the root conftest).

`make test` hands out whole files (`--dist loadfile`), here in collection order: this plugin turns
xdist's own reordering off (`--no-loadscope-reorder`), whose order, most tests first, sent the few
long files last, one worker running the last of them alone. Sending the longest first is the longest-processing-time
rule: what is left at the end is short files, which the two workers share.

- The seconds a file took (setup, call and teardown of its tests, summed) are kept in
  `tests/file_seconds.json` (`--file-seconds PATH` reads another table); `pytest --store-file-seconds`
  writes them afresh from the run (on xdist too: the controller sums its workers' reports).
- A file not in the table (a new one) counts `UNKNOWN_SECONDS_PER_TEST` a test.
- A file that reads a load run the controller runs in the background (its module declares
  `LOAD_RUN`, see tests/load_runs.py) comes last whatever its seconds: its seconds are mostly the
  wait for its run, which has had the rest of the suite's time to end.
- The order changes nothing else: a file's tests keep their order, the ones that use Chromium last
  (see tests/browser.py), and files of equal weight keep collection order. A run in one process
  keeps the plain collection order (the order changes only what runs beside what).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

TABLE = Path(__file__).with_name("file_seconds.json")
UNKNOWN_SECONDS_PER_TEST = 0.5


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--file-seconds",
        type=Path,
        default=TABLE,
        help="the table of each test file's seconds, read to order the files on xdist workers",
    )
    parser.addoption(
        "--store-file-seconds",
        action="store_true",
        help="write the seconds each test file took in this run to that table",
    )


def uses_chromium(item: pytest.Item) -> bool:
    """The test drives the shared Chromium (tests/browser.py)."""
    return "chromium" in getattr(item, "fixturenames", ())


def waits_on_a_load_run(item: pytest.Item) -> bool:
    """The test's module reads a background load run (tests/load_runs.py)."""
    return getattr(getattr(item, "module", None), "LOAD_RUN", None) is not None


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def file_seconds(table_path: Path) -> dict[str, float]:
    try:
        table: dict[str, float] = json.loads(table_path.read_text())
    except FileNotFoundError:
        return {}
    return table


def longest_files_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """`items` with the files in decreasing weight (recorded seconds, else a guess from the count) but
    those that wait on a load run last, each file's tests together in their order but the Chromium
    ones last; ties keep collection order."""
    counts: dict[str, int] = defaultdict(int)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        name = file_of(item.nodeid)
        counts[name] += 1
        first.setdefault(name, index)

    def weight(name: str) -> float:
        return seconds.get(name, counts[name] * UNKNOWN_SECONDS_PER_TEST)

    order = {id(item): index for index, item in enumerate(items)}
    return sorted(
        items,
        key=lambda item: (
            waits_on_a_load_run(item),
            -weight(file_of(item.nodeid)),
            first[file_of(item.nodeid)],
            uses_chromium(item),
            order[id(item)],
        ),
    )


@pytest.hookimpl(wrapper=True)  # around every other sort (tests/browser.py's), to order what they leave
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    yield
    if hasattr(config, "workerinput"):
        items[:] = longest_files_first(items, file_seconds(config.getoption("file_seconds")))


class SecondsRecorder:
    """Sums each file's setup, call and teardown seconds from the reports; writes the table at the end."""

    def __init__(self, table_path: Path) -> None:
        self.table_path = table_path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        table = {name: round(seconds, 1) for name, seconds in sorted(self.seconds.items())}
        self.table_path.write_text(json.dumps(table, indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):  # xdist is loaded (not `-p no:xdist`)
        config.option.loadscopereorder = False
    if config.getoption("store_file_seconds") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SecondsRecorder(config.getoption("file_seconds")), "file-seconds-recorder")
