"""The plan command: good input gives the plan, bad input exit 2 and one line naming the field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import ScenarioError, parse_scenario, plan, plan_to_json
from scheduling.core.__main__ import main

GOOD: dict[str, Any] = {
    "now": 0,
    "budget": 2,
    "aging": {"step": 60, "cap": 2},
    "orgs": {"acme": {"weight": 2, "max_concurrency": 3}, "my org": {"weight": 1}},
    "queued": [
        {"id": "a1", "org": "acme", "created": 1, "avg": 30},
        {"id": "b1", "org": "beta", "created": 2, "avg": 20, "cost": 2},
    ],
    "running": [{"id": "r1", "org": "acme", "started": -5, "avg": 10}],
}


def with_change(path: str, value: object) -> dict[str, Any]:
    """GOOD with the field at `path` (dot-separated, list indices as numbers) set, or removed if
    `value` is REMOVE."""
    data = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    target: Any = data
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is REMOVE:
        del target[key]
    else:
        target[key] = value
    return data


class _Remove:
    """The field is left out (its repr names the test the same in every process: xdist compares them)."""

    def __repr__(self) -> str:
        return "REMOVE"


REMOVE = _Remove()
BIG = 2**60


def run_main(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes) -> tuple[int, str, str]:
    scenario = tmp_path / "scenario.json"
    scenario.write_bytes(text.encode() if isinstance(text, str) else text)
    status = main(["plan", str(scenario)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_good_scenario_prints_its_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_main(tmp_path, capsys, json.dumps(GOOD))
    assert (status, err) == (0, "")
    plan = json.loads(out)
    assert plan["order"] == ["a1", "b1"]
    # r1 holds a unit until 5: b1 (2 units) waits for a1 to finish, at 30.
    assert plan["start"] == {"a1": 0, "b1": 30, "r1": -5}
    assert plan["eta"] == {"a1": 30, "b1": 50, "r1": 5}
    assert plan["org_clear"] == {"acme": 30, "beta": 50}
    assert plan["global_clear"] == 50
    assert all(type(time) is int for time in plan["eta"].values())  # integer input, integer times


def test_a_plan_gives_each_chart_its_late_chance_only_when_a_chart_has_a_due_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run_main(tmp_path, capsys, json.dumps(GOOD))
    assert status == 0
    assert "late_chance" not in json.loads(out)
    due = with_change("queued.1.due", 40)  # b1's ETA is 50
    due["running"][0]["due"] = 5.0  # r1's ETA is 5
    due["due_first"] = True
    status, out, err = run_main(tmp_path, capsys, json.dumps(due))
    assert (status, err) == (0, "")
    assert json.loads(out)["late_chance"] == {"a1": None, "b1": 1.0, "r1": 0.0}


BAD_FIELDS = [
    ("budget", REMOVE, "budget: required"),
    ("budget", 0, "budget: must be an integer >= 1, got 0"),
    ("budget", 2.5, "budget: must be an integer >= 1, got 2.5"),
    ("budget", True, "budget: must be an integer >= 1, got true"),
    ("budget", "3", 'budget: must be an integer >= 1, got "3"'),
    ("budget", BIG, f"budget: must be an integer >= 1 within +-{2**53}, got {BIG}"),
    ("now", "noon", 'now: must be a finite number, got "noon"'),
    ("now", None, "now: must be a finite number, got null"),
    ("policy", "fifo", 'policy: must be "round_robin" or "deficit", got "fifo"'),
    ("policy", ["deficit"], 'policy: must be "round_robin" or "deficit", got ["deficit"]'),
    ("quantum", 0, "quantum: must be a number > 0, got 0"),
    ("quantum", -1.5, "quantum: must be a number > 0, got -1.5"),
    ("aging", 5, "aging: must be an object or absent, got 5"),
    ("aging.step", 0, "aging.step: must be a number > 0, got 0"),
    ("aging.cap", REMOVE, "aging.cap: required"),
    ("aging.cap", -1, "aging.cap: must be an integer >= 0, got -1"),
    ("orgs", [], "orgs: must be an object, got []"),
    ("orgs.acme", 2, "orgs.acme: must be an object, got 2"),
    ("orgs.acme.weight", -1, "orgs.acme.weight: must be an integer >= 0, got -1"),
    ("orgs.acme.weight", 1.5, "orgs.acme.weight: must be an integer >= 0, got 1.5"),
    ("orgs.acme.weight", False, "orgs.acme.weight: must be an integer >= 0, got false"),
    ("orgs.acme.max_concurrency", 0, "orgs.acme.max_concurrency: must be an integer >= 1 or null, got 0"),
    ("orgs.my org.weight", "x", 'orgs["my org"].weight: must be an integer >= 0, got "x"'),
    ("queued", {}, "queued: must be an array, got {}"),
    ("queued.1", "b1", 'queued[1]: must be an object, got "b1"'),
    ("queued.1.id", REMOVE, "queued[1]: id required"),
    ("queued.1.id", 7, "queued[1]: id must be a string, got 7"),
    ("queued.1.id", "a1", 'queued[1] (id "a1"): duplicate id, also queued[0]'),
    ("queued.1.org", REMOVE, 'queued[1] (id "b1"): org required'),
    ("queued.1.org", None, 'queued[1] (id "b1"): org must be a string, got null'),
    ("queued.1.created", REMOVE, 'queued[1] (id "b1"): created required'),
    ("queued.1.created", "yesterday", 'queued[1] (id "b1"): created must be a finite number, got "yesterday"'),
    ("queued.1.avg", 0, 'queued[1] (id "b1"): avg must be a number > 0, got 0'),
    ("queued.1.avg", -3, 'queued[1] (id "b1"): avg must be a number > 0, got -3'),
    ("queued.1.cost", 0, 'queued[1] (id "b1"): cost must be an integer >= 1, got 0'),
    ("queued.1.cost", 1.5, 'queued[1] (id "b1"): cost must be an integer >= 1, got 1.5'),
    ("queued.1.cost", True, 'queued[1] (id "b1"): cost must be an integer >= 1, got true'),
    ("queued.1.high_priority", "yes", 'queued[1] (id "b1"): high_priority must be true or false, got "yes"'),
    ("queued.1.paused", 1, 'queued[1] (id "b1"): paused must be true or false, got 1'),
    ("queued.1.priority", 0.5, 'queued[1] (id "b1"): priority must be an integer, got 0.5'),
    ("queued.1.available_at", "soon", 'queued[1] (id "b1"): available_at must be a finite number, got "soon"'),
    ("queued.1.retry", "no", 'queued[1] (id "b1"): retry must be true or false, got "no"'),
    ("running", 3, "running: must be an array, got 3"),
    ("running.0.started", REMOVE, 'running[0] (id "r1"): started required'),
    ("running.0.avg", 0, 'running[0] (id "r1"): avg must be a number > 0, got 0'),
    ("running.0.cost", -2, 'running[0] (id "r1"): cost must be an integer >= 1, got -2'),
    ("running.0.id", "b1", 'running[0] (id "b1"): duplicate id, also queued[1]'),
    ("queued.1.due", "friday", 'queued[1] (id "b1"): due must be a finite number, got "friday"'),
    ("queued.1.due", True, 'queued[1] (id "b1"): due must be a finite number, got true'),
    ("running.0.due", [1], 'running[0] (id "r1"): due must be a finite number, got [1]'),
    ("due_first", 1, "due_first: must be true or false, got 1"),
    ("due_first", None, "due_first: must be true or false, got null"),
    ("retry_budget", -1, "retry_budget: must be an integer >= 0, got -1"),
    ("retry_budget", 1.5, "retry_budget: must be an integer >= 0, got 1.5"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD_FIELDS, ids=[f"{p}={v!r}"[:40] for p, v, _ in BAD_FIELDS])
def test_a_field_that_breaks_the_contract_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, value: object, message: str
) -> None:
    assert run_main(tmp_path, capsys, json.dumps(with_change(path, value))) == (2, "", message + "\n")


NOT_FINITE = [
    ('"budget": 2', '"budget": NaN', "budget: must be an integer >= 1, got NaN"),
    ('"now": 0', '"now": Infinity', "now: must be a finite number, got Infinity"),
    ('"avg": 30', '"avg": NaN', 'queued[0] (id "a1"): avg must be a number > 0, got NaN'),
    ('"created": 2', '"created": -Infinity', 'queued[1] (id "b1"): created must be a finite number, got -Infinity'),
    ('"avg": 30', '"avg": 1e400', 'queued[0] (id "a1"): avg must be a number > 0, got Infinity'),
]


@pytest.mark.parametrize(("good", "bad", "message"), NOT_FINITE)
def test_nan_and_infinity_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], good: str, bad: str, message: str
) -> None:
    text = json.dumps(GOOD)
    assert good in text
    assert run_main(tmp_path, capsys, text.replace(good, bad, 1)) == (2, "", message + "\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "scenario: must be an object, got [1, 2]"),
        ('"budget"', 'scenario: must be an object, got "budget"'),
        # The decoder's own wording (which varies between Python versions) follows the prefix.
        ("", "{file}: invalid JSON: "),
        ('{"budget": 1,}', "{file}: invalid JSON: "),
        (b"\xff\xfe{", "{file}: invalid JSON: "),
        ("[" * 100_000, "{file}: invalid JSON: "),
    ],
    ids=["array", "string", "empty", "trailing-comma", "not-utf", "too-deep"],
)
def test_input_that_is_no_scenario_object_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, message: str
) -> None:
    status, out, err = run_main(tmp_path, capsys, text)
    assert (status, out) == (2, "")
    assert err.startswith(message.format(file=tmp_path / "scenario.json"))
    assert err.count("\n") == 1
    assert err.endswith("\n")


def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.json"
    assert main(["plan", str(missing)]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"{missing}: cannot read: No such file or directory\n")


@pytest.mark.parametrize("argv", [[], ["plan"], ["plan", "a", "b"], ["replan", "x.json"]])
def test_a_wrong_command_line_prints_the_usage(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: python -m scheduling.core plan FILE")
    assert captured.err.count("\n") == 1


def run_command(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduling.core", *args], input=stdin, capture_output=True, text=True, check=False
    )


def test_the_command_reads_standard_input() -> None:
    run = run_command("plan", "-", stdin=json.dumps(GOOD))
    assert (run.returncode, run.stderr) == (0, "")
    assert json.loads(run.stdout)["order"] == ["a1", "b1"]


def test_the_command_exits_2_with_one_line_on_bad_input() -> None:
    run = run_command("plan", "-", stdin=json.dumps(with_change("queued.1.cost", 0)))
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == 'queued[1] (id "b1"): cost must be an integer >= 1, got 0\n'


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
FIELD_PATHS = [path for path, _, _ in BAD_FIELDS if "my org" not in path] + [
    "orgs.beta",
    "queued.0",
    "queued.0.available_at",
    "running.0.retry",
    "aging.step",
]


@settings(max_examples=300, deadline=None, database=None)
@given(st.sampled_from(FIELD_PATHS), JSON_VALUES)
def test_any_value_in_any_field_is_planned_or_refused_with_a_scenario_error(path: str, value: object) -> None:
    message = None
    try:
        scenario = parse_scenario(with_change(path, value))
    except ScenarioError as error:
        message = str(error)
    if message is None:
        json.dumps(plan_to_json(plan(scenario)), allow_nan=False)
    else:
        assert message.startswith(path.split(".")[0])
        assert "\n" not in message
