"""The one-loop replay `plan` takes for caps and backoffs (`org_replay`), against the naive reference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import Aging, OrgPolicy, QueuedChart, RunningChart, Scenario, plan
from scheduling.core import org_replay as org_replay_module

from . import reference
from .support import replay_forced, scenarios

EXAMPLES = settings(max_examples=300, deadline=None, database=None)


def assert_plan_is_the_reference_replay(scenario: Scenario) -> None:
    result = plan(scenario)
    expected_start = reference.replay(scenario, reference.fair_order(scenario))
    for chart in scenario.queued:
        start = expected_start.get(chart.id)
        assert result.start[chart.id] == start, chart.id
        assert result.eta[chart.id] == (None if start is None else start + chart.avg), chart.id


@EXAMPLES
@given(scenarios(max_queued=40, retry_budget=False))
def test_caps_and_backoffs_replay_as_the_reference(scenario: Scenario) -> None:
    assert_plan_is_the_reference_replay(scenario)


@EXAMPLES
@given(scenarios(max_queued=40, retry_budget=False))
def test_the_replay_without_the_closed_form_tail_is_the_same(scenario: Scenario) -> None:
    with_tail = plan(scenario)
    with mock.patch.object(org_replay_module, "_tail_is_free", return_value=False):
        without_tail = plan(scenario)
    assert with_tail == without_tail


def with_the_event_replay(scenario: Scenario) -> Scenario:
    """The same scenario sent down `EventReplay` (the general replay): every chart a retry under a
    retry budget that can never bind."""
    queued = [replace(chart, retry=True) for chart in scenario.queued]
    running = [replace(chart, retry=True) for chart in scenario.running]
    total = sum(min(chart.cost, scenario.budget) for chart in queued) + sum(
        min(chart.cost, scenario.budget) for chart in running
    )
    return replace(scenario, queued=queued, running=running, retry_budget=total + 1)


@st.composite
def busy_scenarios(
    draw: st.DrawFn,
    *,
    weights: Sequence[int] = (0, 1, 1, 2, 3),
    caps: Sequence[int | None] = (None, None, 1, 2, 3),
) -> Scenario:
    """Up to 150 charts, most of one unit, in up to 8 orgs some of which are capped: long runs of the
    line (the charts of uncapped orgs) between capped finishes and arrivals, ties among finishes, dearer
    charts, late charts, holds, priorities and aging, both policies."""
    budget = draw(st.integers(1, 8))
    org_names = [f"org{index}" for index in range(draw(st.integers(1, 8)))]
    orgs = {
        name: OrgPolicy(weight=draw(st.sampled_from(weights)), max_concurrency=draw(st.sampled_from(caps)))
        for name in org_names
    }
    now = draw(st.sampled_from([0, 2.5]))
    durations = st.sampled_from([1, 2, 3, 0.5, 2.5, 4, 7.25])
    count = draw(st.integers(0, 150))
    queued = [
        QueuedChart(
            id=f"q{index:03d}",
            org=draw(st.sampled_from(org_names)),
            created=draw(st.integers(0, 20)),
            avg=draw(durations),
            cost=draw(st.sampled_from([1, 1, 1, 1, 2, budget + 1])),
            high_priority=draw(st.sampled_from([False] * 15 + [True])),
            priority=draw(st.sampled_from([0, 0, 0, 1, -1])),
            available_at=draw(st.sampled_from([None] * 9 + [now + 3, now + 10.5])),
        )
        for index in range(count)
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


@settings(max_examples=200, deadline=None, database=None)
@given(busy_scenarios())
def test_the_line_and_the_capped_heads_replay_as_the_event_replay(scenario: Scenario) -> None:
    with replay_forced(lanes=False):
        result = plan(scenario)
    expected = plan(with_the_event_replay(scenario))
    assert result.start == expected.start
    assert result.eta == expected.eta


@settings(max_examples=200, deadline=None, database=None)
@given(busy_scenarios(weights=(1, 4, 8), caps=(None, 1, 1, 2)))
def test_lagging_capped_orgs_replay_as_the_event_replay(scenario: Scenario) -> None:
    """Capped orgs of large weights fall behind the line: they are parked as a start takes them to
    their cap, wake at their finishes (often several at one instant) and catch up again; the other
    capped finishes give their slots back only when the walk meets the org's head."""
    with replay_forced(lanes=False):
        result = plan(scenario)
    expected = plan(with_the_event_replay(scenario))
    assert result.start == expected.start
    assert result.eta == expected.eta


def test_a_late_chart_behind_the_one_the_line_starts_takes_the_budget_left_at_that_instant() -> None:
    """At 3 a's finish frees 2 units: the line starts b with one, and c0, back from its backoff and
    behind b in the order but ahead of the line's next chart (c1), takes the other at once."""
    queued = [
        QueuedChart(id="a", org="x", created=0, avg=3, cost=2),
        QueuedChart(id="b", org="x", created=1, avg=5),
        QueuedChart(id="c0", org="y", created=2, avg=1, available_at=1),
        QueuedChart(id="c1", org="y", created=3, avg=1),
    ]
    running = [RunningChart(id="r", org="z", started=0, avg=9)]
    orgs = {"x": OrgPolicy(weight=2), "z": OrgPolicy(max_concurrency=1)}
    scenario = Scenario(now=0, budget=3, orgs=orgs, queued=queued, running=running)
    assert_plan_is_the_reference_replay(scenario)
    assert plan(scenario).order == ["a", "b", "c0", "c1"]
    assert [plan(scenario).start[chart] for chart in ("a", "b", "c0", "c1")] == [0, 3, 3, 4]


def capped_scenario(*, cap: int, backoff: bool) -> Scenario:
    """An uncapped org's few charts, then a capped org's many: the capped org's are the tail."""
    queued = [
        QueuedChart(id=f"a{index:02d}", org="a", created=index, avg=3 + index % 4, cost=1 + index % 2)
        for index in range(6)
    ]
    queued += [
        QueuedChart(
            id=f"b{index:02d}",
            org="b",
            created=index,
            avg=1 + index % 5,
            cost=1 + index % 3,
            available_at=20 + 3 * index if backoff and index % 4 == 1 else None,
        )
        for index in range(40)
    ]
    running = [RunningChart(id="rb", org="b", started=0, avg=5), RunningChart(id="ra", org="a", started=1, avg=2)]
    orgs = {"b": OrgPolicy(weight=1, max_concurrency=cap)}
    return Scenario(now=2, budget=4 * cap + 2, orgs=orgs, queued=queued, running=running)


def test_the_tail_of_a_capped_org_is_exact_with_a_cap_of_one() -> None:
    tails = []
    original = org_replay_module._replay_tail

    def counted(*args: object, **kwargs: object) -> None:
        tails.append(1)
        original(*args, **kwargs)  # type: ignore[arg-type]

    with mock.patch.object(org_replay_module, "_replay_tail", counted):
        assert_plan_is_the_reference_replay(capped_scenario(cap=1, backoff=False))
    assert tails == [1]


def test_the_tail_of_a_capped_org_is_exact_with_more_slots_and_backoffs() -> None:
    for cap in (1, 2, 3):
        assert_plan_is_the_reference_replay(capped_scenario(cap=cap, backoff=True))


def test_free_slots_of_a_tail_wait_for_charts_that_come_later_together() -> None:
    queued = [QueuedChart(id="a0", org="a", created=0, avg=4)]
    queued += [QueuedChart(id=f"b{i}", org="b", created=i, avg=3 + i, available_at=50) for i in range(4)]
    scenario = Scenario(now=0, budget=10, orgs={"b": OrgPolicy(max_concurrency=2)}, queued=queued, running=[])
    assert_plan_is_the_reference_replay(scenario)
    result = plan(scenario)
    assert [result.start[f"b{i}"] for i in range(4)] == [50, 50, 53, 54]


def test_an_org_running_past_its_lowered_cap_still_holds_the_budget_in_the_tail() -> None:
    running = [RunningChart(id=f"rb{i}", org="b", started=0, avg=10 + i) for i in range(3)]
    queued = [QueuedChart(id="a0", org="a", created=0, avg=1)]
    queued += [QueuedChart(id=f"b{i}", org="b", created=i, avg=5) for i in range(2)]
    queued += [QueuedChart(id=f"c{i}", org="c", created=i, avg=3, cost=2) for i in range(3)]
    orgs = {"b": OrgPolicy(max_concurrency=1), "c": OrgPolicy(max_concurrency=1)}
    scenario = Scenario(now=0, budget=5, orgs=orgs, queued=queued, running=running)
    assert_plan_is_the_reference_replay(scenario)


def test_an_uncapped_org_may_run_more_charts_than_the_order_holds() -> None:
    running = [
        RunningChart(id="big", org="acme", started=-4, avg=3, cost=5),
        RunningChart(id="g1", org="gamma", started=3, avg=3),
        RunningChart(id="g2", org="gamma", started=3, avg=3),
    ]
    queued = [QueuedChart(id="g3", org="gamma", created=2, avg=5, cost=3)]
    scenario = Scenario(now=4, budget=6, queued=queued, running=running)
    with replay_forced(lanes=False):
        assert_plan_is_the_reference_replay(scenario)
        assert plan(scenario).start["g3"] == 4
