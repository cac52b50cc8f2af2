"""How `plan` takes the compiled replay (`replay.compiled.compiled_replay`): when, and with the same
plan bit for bit on larger scenarios (its parity with the reference on small ones is in
`test_replay_parity`)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import settings

from scheduling.core import OrgPolicy, Plan, QueuedChart, RunningChart, Scenario, plan, plan_to_json
from scheduling.core import replay as replay_module
from scheduling.core.replay.compiled import compiled_replay

EXAMPLES = settings(max_examples=200, deadline=None, database=None)


def large_scenario(seed: int, *, charts: int = 3_000) -> Scenario:
    """A busy pool of float times: skewed orgs, one in four capped (at 1 to 3), mixed costs, charts
    in backoff, running charts of capped and uncapped orgs, priorities, pauses and held orgs."""
    rng = random.Random(seed)
    now = 1_700_000_000.123
    names = [f"org{index:02d}" for index in range(40)]
    orgs = {
        name: OrgPolicy(
            weight=rng.choice((0, 1, 1, 2, 3)) if index else 1,
            max_concurrency=rng.randint(1, 3) if index % 4 == 0 else None,
        )
        for index, name in enumerate(names)
    }
    budget = rng.choice((8, 20))
    queued = [
        QueuedChart(
            id=f"c{index:05d}",
            org=rng.choices(names, weights=[1 / (rank + 1) for rank in range(len(names))])[0],
            created=round(now - rng.uniform(0, 5_000), 1),
            avg=rng.choice((30.0, 60.1, 90.7, 599.9)),
            cost=rng.choice((1, 1, 1, 2, 3, budget + 4)),
            priority=rng.choice((0, 0, 0, 1, -1)),
            paused=rng.random() < 0.01,
            available_at=round(now + rng.uniform(0, 2_000), 1) if rng.random() < 0.03 else None,
        )
        for index in range(charts)
    ]
    running = [
        RunningChart(
            id=f"r{index:03d}",
            org=rng.choice(names),
            started=round(now - rng.uniform(0, 500), 1),
            avg=rng.choice((60.0, 300.3)),
            cost=rng.choice((1, 2)),
        )
        for index in range(budget)
    ]
    return Scenario(now=now, budget=budget, orgs=orgs, queued=queued, running=running)


def every_field(result: Plan) -> str:
    """Every field of the plan as text: floats by their repr (bit for bit), ints apart from floats."""
    return json.dumps(
        {
            **plan_to_json(result),
            "eta_low": dict(result.eta_low),
            "eta_high": dict(result.eta_high),
            "org_clear_low": result.org_clear_low,
            "org_clear_high": result.org_clear_high,
            "reason": dict(result.reason),
            "waiting_until": dict(result.waiting_until),
            "head_of_line": dict(result.head_of_line),
        }
    )


@pytest.fixture
def compiled_taken() -> Iterator[mock.MagicMock]:
    """`plan` takes the compiled replay at any size; yields a spy on it."""
    assert replay_module.load_compiled_replay()
    spy = mock.MagicMock(side_effect=compiled_replay)
    with (
        mock.patch.object(replay_module, "COMPILED_MIN_CHARTS", 0),
        mock.patch.object(replay_module, "_imported_compiled_replay", return_value=spy),
    ):
        yield spy


@pytest.mark.parametrize("seed", range(6))
def test_plan_with_the_compiled_replay_is_plan_without_it(
    seed: int, compiled_taken: mock.MagicMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = large_scenario(seed)
    with_it = every_field(plan(scenario))
    assert compiled_taken.call_count == 1
    monkeypatch.setenv("FAIRSCHED_COMPILED_CORE", "0")
    without_it = every_field(plan(scenario))
    assert compiled_taken.call_count == 1
    assert with_it == without_it


def test_a_scenario_of_integer_times_keeps_them_integers(compiled_taken: mock.MagicMock) -> None:
    queued = [QueuedChart(id=f"c{index}", org="a", created=index, avg=2 + index % 3) for index in range(6)]
    running = [RunningChart(id="r", org="a", started=0, avg=3)]
    result = plan(Scenario(now=1, budget=2, queued=queued, running=running))
    assert compiled_taken.call_count == 0
    assert [result.start[f"c{index}"] for index in range(3)] == [1, 3, 3]
    assert all(type(result.start[f"c{index}"]) is int for index in range(6))


def test_an_integer_now_among_float_durations_stays_an_integer(compiled_taken: mock.MagicMock) -> None:
    queued = [QueuedChart(id=f"c{index}", org="a", created=index, avg=2.5) for index in range(3)]
    result = plan(Scenario(now=1, budget=1, queued=queued, running=[]))
    assert compiled_taken.call_count == 0
    assert type(result.start["c0"]) is int
    assert result.start["c1"] == 3.5


def test_a_retry_budget_keeps_the_event_replay(compiled_taken: mock.MagicMock) -> None:
    scenario = large_scenario(0, charts=200)
    queued = [replace(chart, retry=index % 7 == 0) for index, chart in enumerate(scenario.queued)]
    plan(replace(scenario, queued=queued, retry_budget=2))
    assert compiled_taken.call_count == 0


def test_a_small_plan_never_imports_numba() -> None:
    program = (
        "import sys\n"
        "from scheduling.core import QueuedChart, Scenario, plan\n"
        "queued = [QueuedChart(id=f'c{i}', org='a', created=float(i), avg=1.5) for i in range(50_000)]\n"
        "plan(Scenario(now=0.5, budget=3, queued=queued, running=[]))\n"
        "print('numba' in sys.modules)\n"
    )
    output = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"


def test_the_environment_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSCHED_COMPILED_CORE", "0")
    assert not replay_module.load_compiled_replay()
    with mock.patch.object(replay_module, "COMPILED_MIN_CHARTS", 0):
        assert replay_module._compiled_replay(10**7, lanes=False) is None
    monkeypatch.setenv("FAIRSCHED_COMPILED_CORE", "1")
    assert replay_module._compiled_replay(10**7, lanes=False) is compiled_replay
