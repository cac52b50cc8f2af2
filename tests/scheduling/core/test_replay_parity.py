"""The parity matrix: every fast replay gives the reference's starts and ETAs.

The reference (`replay.reference_replay`, the walk through `Dispatcher.decide`) is first held to the
naive reading of the contract (`reference.replay`). Then each fast replay (the lane simulation, the
compiled one) is held to the reference twice: on replay inputs drawn directly (times whose sums
round, charts of the whole budget, running charts holding more than it), and through `plan` on
scenarios, whose order brings in holds, pauses, priorities, aging and both policies, with caps, ties,
multi-unit charts, backoffs and retry budgets where the fast replay covers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import Aging, OrgPolicy, Plan, QueuedChart, RunningChart, Scenario, plan
from scheduling.core import planner as planner_module
from scheduling.core.replay import ReplayInput, Times, compiled_run, lanes_run, reference_replay
from scheduling.core.replay.compiled import compiled_replay

from . import reference
from .support import scenarios, with_dues

EXAMPLES = settings(max_examples=200, deadline=None, database=None)


def by_lanes(given: ReplayInput) -> tuple[Times, Times]:
    return lanes_run(given)


def by_the_compiled_replay(given: ReplayInput) -> tuple[Times, Times]:
    return compiled_run(compiled_replay, given)


def lanes_cover(given: ReplayInput) -> bool:
    """No cap on an org of the order, no chart available later, no retry under a retry budget."""
    return not len(given.later) and given.retry is None and all(given.caps[org] is None for org in given.org.tolist())


def compiled_covers(given: ReplayInput) -> bool:
    """No retry under a retry budget."""
    return given.retry is None


FAST: dict[str, tuple[Callable[[ReplayInput], tuple[Times, Times]], Callable[[ReplayInput], bool]]] = {
    "lanes": (by_lanes, lanes_cover),
    "compiled": (by_the_compiled_replay, compiled_covers),
}


@st.composite
def replay_inputs(draw: st.DrawFn, *, lanes: bool = False) -> ReplayInput:
    """Up to 60 charts in up to 5 orgs: caps (1 often), charts that come later (some at one time),
    units above 1 and up to the budget (min(cost, budget), as the plan gives them), running charts
    that hold more than the budget, durations and finishes that tie, times whose sums round. With
    `lanes`, what the lane simulation covers."""
    now = draw(st.sampled_from([0.0, 2.5, 0.3, 1.7e9 + 0.123]))
    budget = draw(st.integers(1, 6))
    org_count = draw(st.integers(1, 5))
    caps = [None if lanes else draw(st.sampled_from([None, None, 1, 1, 2, 3])) for _ in range(org_count)]
    later = st.none() if lanes else st.sampled_from([None] * 6 + [0.5, 3.0, 3.0, 10.5])
    charts = draw(
        st.lists(
            st.tuples(
                st.integers(0, org_count - 1),
                st.sampled_from([1, 1, 1, 2, budget]).map(lambda cost: min(cost, budget)),
                st.sampled_from([1.0, 2.0, 0.5, 2.5, 0.1, 0.7, 1 / 3]),
                later.map(lambda delay: None if delay is None else now + delay),
            ),
            max_size=60,
        )
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
    pending = [(ready_at, chart) for chart, (_, _, _, ready_at) in enumerate(charts) if ready_at is not None]
    avg = [chart[2] for chart in charts]
    return ReplayInput(
        now=now,
        budget=budget,
        caps=caps,
        org=np.array([chart[0] for chart in charts], dtype=np.intp),
        units=np.array([chart[1] for chart in charts], dtype=np.int64),
        avg=avg,
        avg_time=np.array(avg, dtype=np.float64),
        later=np.array([chart for _, chart in pending], dtype=np.intp),
        later_at=np.array([ready_at for ready_at, _ in pending], dtype=np.float64),
        pending=pending,
        retry=None,
        retry_budget=None,
        lanes=lanes,
        running_finish=[finish for finish, _, _ in running],
        running_org=[org for _, org, _ in running],
        running_units=[units for _, _, units in running],
        running_retry=[False] * len(running),
    )


@st.composite
def busy_scenarios(
    draw: st.DrawFn,
    *,
    weights: tuple[int, ...] = (0, 1, 1, 2, 3),
    caps: tuple[int | None, ...] = (None, None, 1, 2, 3),
    backoffs: bool = True,
) -> Scenario:
    """Up to 150 charts, most of one unit, in up to 8 orgs some of which are capped: long runs of
    uncapped charts between capped finishes and arrivals, ties among finishes, dearer charts, late
    charts, holds, priorities and aging, both policies."""
    budget = draw(st.integers(1, 8))
    org_names = [f"org{index}" for index in range(draw(st.integers(1, 8)))]
    orgs = {
        name: OrgPolicy(weight=draw(st.sampled_from(weights)), max_concurrency=draw(st.sampled_from(caps)))
        for name in org_names
    }
    now = draw(st.sampled_from([0, 2.5]))
    durations = st.sampled_from([1, 2, 3, 0.5, 2.5, 4, 7.25])
    later = st.sampled_from([None] * 9 + [now + 3, now + 10.5]) if backoffs else st.none()
    queued = [
        QueuedChart(
            id=f"q{index:03d}",
            org=draw(st.sampled_from(org_names)),
            created=draw(st.integers(0, 20)),
            avg=draw(durations),
            cost=draw(st.sampled_from([1, 1, 1, 1, 2, budget + 1])),
            high_priority=draw(st.sampled_from([False] * 15 + [True])),
            priority=draw(st.sampled_from([0, 0, 0, 1, -1])),
            available_at=draw(later),
        )
        for index in range(draw(st.integers(0, 150)))
    ]
    running = [
        RunningChart(
            id=f"r{index}",
            org=draw(st.sampled_from(org_names)),
            started=now - draw(durations),
            avg=draw(durations),
            cost=draw(st.sampled_from([1, 1, 2])),
        )
        for index in range(draw(st.integers(0, budget + 2)))
    ]
    return Scenario(
        now=now,
        budget=budget,
        policy=draw(st.sampled_from(["round_robin", "deficit"])),
        aging=draw(st.sampled_from([None, Aging(step=5, cap=2)])),
        orgs=orgs,
        queued=queued,
        running=running,
    )


# The scenarios each fast replay covers: all of them for the compiled one but a binding retry budget.
SCENARIOS = {
    "lanes": scenarios(max_queued=30, caps=False, availability=False, retry_budget=False)
    | busy_scenarios(caps=(None,), backoffs=False),
    "compiled": scenarios(max_queued=30, retry_budget=False)
    | busy_scenarios()
    | busy_scenarios(weights=(1, 4, 8), caps=(None, 1, 1, 2)),
}


def planned_by(path: str, scenario: Scenario) -> tuple[dict[str, object], bool]:
    """Every field of `plan(scenario)` with its replay made by `path` ("reference" or a fast one), and
    whether the fast one took it."""
    taken = []

    def chosen(given: ReplayInput) -> tuple[Times, Times]:
        if path != "reference":
            fast, covers = FAST[path]
            if covers(given):
                taken.append(path)
                return fast(given)
        return reference_replay(given)

    with mock.patch.object(planner_module, "replay", chosen):
        return every_field(plan(scenario)), bool(taken)


def every_field(result: Plan) -> dict[str, object]:
    return {
        "order": list(result.order),
        "start": dict(result.start),
        "eta": dict(result.eta),
        "org_clear": result.org_clear,
        "global_clear": result.global_clear,
        "reason": dict(result.reason),
        "waiting_until": dict(result.waiting_until),
        "head_of_line": dict(result.head_of_line),
        "late_chance": dict(result.late_chance),
    }


@EXAMPLES
@given(scenarios())
def test_the_reference_is_the_naive_reading_of_the_contract(scenario: Scenario) -> None:
    result, _ = planned_by("reference", scenario)
    expected_start = reference.replay(scenario, reference.fair_order(scenario))
    for chart in scenario.queued:
        start = expected_start.get(chart.id)
        assert result["start"][chart.id] == start, chart.id  # type: ignore[index]
        assert result["eta"][chart.id] == (None if start is None else start + chart.avg), chart.id  # type: ignore[index]


@pytest.mark.parametrize("path", sorted(FAST))
@EXAMPLES
@given(data=st.data())
def test_every_fast_replay_is_the_reference_through_plan(path: str, data: st.DataObject) -> None:
    scenario = data.draw(SCENARIOS[path])
    if data.draw(st.booleans()):
        scenario = data.draw(with_dues(scenario))
    fast, taken = planned_by(path, scenario)
    assert taken
    assert fast == planned_by("reference", scenario)[0]


@pytest.mark.parametrize("path", sorted(FAST))
@EXAMPLES
@given(data=st.data())
def test_every_fast_replay_is_the_reference_on_its_inputs(path: str, data: st.DataObject) -> None:
    given_input = data.draw(replay_inputs(lanes=path == "lanes"))
    fast, covers = FAST[path]
    assert covers(given_input)
    assert fast(given_input) == reference_replay(given_input)


def test_the_compiled_replay_leaves_a_retry_budget_to_the_reference() -> None:
    queued = [QueuedChart(id=f"c{index}", org="a", created=index, avg=1.5, retry=index % 2 == 0) for index in range(6)]
    scenario = Scenario(now=0.5, budget=3, queued=queued, running=[], retry_budget=1)
    _, taken = planned_by("compiled", scenario)
    assert not taken
    assert planned_by("compiled", replace(scenario, retry_budget=None))[1]


def test_a_chart_dearer_than_the_free_budget_holds_every_chart_behind_it() -> None:
    given_input = ReplayInput(
        now=0.0, budget=2, caps=[None], org=np.zeros(3, dtype=np.intp), units=np.array([1, 2, 1]),
        avg=[1.0] * 3, avg_time=np.ones(3), later=np.zeros(0, dtype=np.intp), later_at=np.zeros(0), pending=[],
        retry=None, retry_budget=None, lanes=False, running_finish=[], running_org=[], running_units=[],
        running_retry=[],
    )  # fmt: skip
    for replay in (reference_replay, by_the_compiled_replay):
        assert replay(given_input) == ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])


def test_running_retries_hold_back_no_chart_that_is_not_a_retry() -> None:
    """Under a retry budget already spent by running retries, a queue without retries starts and
    waits as it would without the budget: the reference walk and the reasons keep no retry budget
    when no chart of the order is a retry."""
    queued = [QueuedChart(id=f"c{index}", org="a", created=index, avg=2.0) for index in range(4)]
    running = [RunningChart(id="r", org="b", started=0.0, avg=1.5, retry=True)]
    capped = {"a": OrgPolicy(max_concurrency=2)}  # a cap: the reference walk, not the lanes
    scenario = Scenario(now=0.5, budget=3, orgs=capped, queued=queued, running=running, retry_budget=0)
    with_budget, without = plan(scenario), plan(replace(scenario, retry_budget=None))
    assert dict(with_budget.start) == dict(without.start) == {"c0": 0.5, "c1": 0.5, "c2": 2.5, "c3": 2.5, "r": 0.0}
    assert dict(with_budget.reason) == dict(without.reason)
    assert with_budget.reason["c2"] == "org_cap"
