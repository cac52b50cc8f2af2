"""The compiled replay (`compiled.compiled_replay`) against the pure replays, its reference: the
same starts and ETAs bit for bit, directly on small inputs and through `plan` on larger ones."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import OrgPolicy, Plan, QueuedChart, RunningChart, Scenario, plan, plan_to_json
from scheduling.core import planner as planner_module
from scheduling.core.compiled import compiled_replay
from scheduling.core.dispatcher import Dispatcher
from scheduling.core.lanes import lane_replay
from scheduling.core.org_replay import org_replay
from scheduling.core.replay import EventReplay

EXAMPLES = settings(max_examples=200, deadline=None, database=None)


@dataclass(frozen=True)
class Replay:
    """What every replay takes: the charts of the order (org code, units, avg, when available:
    None for now) and the running charts (finish, org code, units)."""

    now: float
    budget: int
    caps: list[int | None]
    org: list[int]
    units: list[int]
    avg: list[float]
    available_at: list[float | None]
    running_finish: list[float]
    running_org: list[int]
    running_units: list[int]

    def pending(self) -> list[tuple[float, int]]:
        return [(ready_at, chart) for chart, ready_at in enumerate(self.available_at) if ready_at is not None]


@st.composite
def replays(draw: st.DrawFn, *, lanes: bool = False) -> Replay:
    """Up to 60 charts in up to 5 orgs: caps (1 often), charts that come later (some at one time),
    units above 1 and above the budget (such a chart never starts, nor any behind it), running charts
    that hold more than the budget, durations and finishes that tie, times whose sums round. With `lanes`, what the lane
    simulation covers: no cap, nothing later, no chart dearer than the budget."""
    now = draw(st.sampled_from([0.0, 2.5, 0.3, 1.7e9 + 0.123]))
    budget = draw(st.integers(1, 6))
    org_count = draw(st.integers(1, 5))
    caps = [None if lanes else draw(st.sampled_from([None, None, 1, 1, 2, 3])) for _ in range(org_count)]
    costs = [1, 1, 1, 2, budget] if lanes else [1, 1, 1, 2, budget, budget + 1]
    later = st.none() if lanes else st.sampled_from([None] * 6 + [0.5, 3.0, 3.0, 10.5])
    charts = draw(
        st.lists(
            st.tuples(
                st.integers(0, org_count - 1),
                st.sampled_from(costs).map(lambda cost: min(cost, budget) if lanes else cost),
                st.sampled_from([1.0, 2.0, 0.5, 2.5, 0.1, 0.7, 1 / 3]),
                later.map(lambda delay: None if delay is None else now + delay),
            ),
            max_size=60,
        )
    )
    org, units, avg, available_at = (
        (list(column) for column in zip(*charts, strict=True)) if charts else ([], [], [], [])
    )
    running = draw(
        st.lists(
            st.tuples(
                st.sampled_from([0.0, 1.0, 2.5, 0.1]).map(lambda delay: now + delay),
                st.integers(0, org_count - 1),
                st.sampled_from([1, 1, 2, budget]),
            ),
            max_size=budget + 2,
        )
    )
    running_finish, running_org, running_units = (
        (list(column) for column in zip(*running, strict=True)) if running else ([], [], [])
    )
    return Replay(now, budget, caps, org, units, avg, available_at, running_finish, running_org, running_units)


def compiled(replay: Replay) -> tuple[list[float | None], list[float | None]]:
    pending = replay.pending()
    starts, etas = compiled_replay(
        now=replay.now,
        budget=replay.budget,
        caps=replay.caps,
        org=np.array(replay.org, dtype=np.intp),
        units=np.array(replay.units, dtype=np.int64),
        avg=np.array(replay.avg, dtype=np.float64),
        later=np.array([chart for _, chart in pending], dtype=np.intp),
        later_at=np.array([ready_at for ready_at, _ in pending], dtype=np.float64),
        running_finish=replay.running_finish,
        running_org=replay.running_org,
        running_units=replay.running_units,
    )
    return [None if math.isnan(start) else start for start in starts.tolist()], [
        None if math.isnan(eta) else eta for eta in etas.tolist()
    ]


@EXAMPLES
@given(replays())
def test_the_compiled_replay_is_org_replay(replay: Replay) -> None:
    expected = org_replay(
        now=replay.now,
        budget=replay.budget,
        caps=replay.caps,
        org=np.array(replay.org, dtype=np.intp),
        units=replay.units,
        avg=replay.avg,
        pending=replay.pending(),
        running_finish=replay.running_finish,
        running_org=replay.running_org,
        running_units=replay.running_units,
    )
    assert compiled(replay) == expected


@EXAMPLES
@given(replays())
def test_the_compiled_replay_is_the_event_replay(replay: Replay) -> None:
    dispatcher = Dispatcher(
        budget=replay.budget,
        caps=replay.caps,
        org=replay.org,
        units=replay.units,
        available_at=replay.available_at,
        retry=[False] * len(replay.org),
        retry_budget=None,
    )
    expected = EventReplay(
        dispatcher,
        now=replay.now,
        avg=replay.avg,
        org_count=len(replay.caps),
        running_finish=replay.running_finish,
        running_org=replay.running_org,
        running_units=replay.running_units,
        running_retry=[False] * len(replay.running_org),
    ).run()
    assert compiled(replay) == expected


@EXAMPLES
@given(replays(lanes=True))
def test_the_compiled_replay_is_the_lane_simulation(replay: Replay) -> None:
    expected = lane_replay(
        now=replay.now,
        budget=replay.budget,
        running_finish=replay.running_finish,
        running_units=replay.running_units,
        units=replay.units,
        avg=replay.avg,
    )
    assert compiled(replay) == expected


def test_a_chart_dearer_than_the_budget_holds_every_chart_behind_it() -> None:
    replay = Replay(0.0, 2, [None], [0, 0, 0], [1, 3, 1], [1.0, 1.0, 1.0], [None] * 3, [], [], [])
    assert compiled(replay) == ([0.0, None, None], [1.0, None, None])


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
    assert planner_module.load_compiled_replay()
    spy = mock.MagicMock(side_effect=compiled_replay)
    with (
        mock.patch.object(planner_module, "COMPILED_MIN_CHARTS", 0),
        mock.patch.object(planner_module, "_imported_compiled_replay", return_value=spy),
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
    assert not planner_module.load_compiled_replay()
    with mock.patch.object(planner_module, "COMPILED_MIN_CHARTS", 0):
        assert planner_module._compiled_replay(10**7, lanes=False) is None
    monkeypatch.setenv("FAIRSCHED_COMPILED_CORE", "1")
    assert planner_module._compiled_replay(10**7, lanes=False) is compiled_replay
