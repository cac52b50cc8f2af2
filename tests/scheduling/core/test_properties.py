"""Property-based tests of the core against the contract and against `reference` (a naive reading)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import (
    Arrival,
    OrgPolicy,
    Plan,
    QueueColumns,
    QueuedChart,
    RunningChart,
    Scenario,
    dispatch_walk,
    fair_order,
    parse_scenario,
    plan,
    plan_to_json,
)
from scheduling.core.model import Policy

from . import reference
from .support import scenario_json, scenarios, with_dues

# Plenty of small examples; no example database, so that running the tests writes no files.
EXAMPLES = settings(max_examples=150, deadline=None, database=None)


def plan_dict(result: Plan) -> dict[str, object]:
    return plan_to_json(result)


@EXAMPLES
@given(scenarios())
def test_order_is_the_reference_order_of_the_eligible_charts(scenario: Scenario) -> None:
    order = [chart.id for chart in fair_order(scenario)]
    assert order == [chart.id for chart in reference.fair_order(scenario)]
    assert sorted(order) == sorted(chart.id for chart in reference.eligible(scenario))
    assert plan(scenario).order == order


@EXAMPLES
@given(scenarios(), st.randoms(use_true_random=False))
def test_plan_is_deterministic_and_ignores_the_input_order(scenario: Scenario, rng: random.Random) -> None:
    shuffled_queued, shuffled_running = list(scenario.queued), list(scenario.running)
    rng.shuffle(shuffled_queued)
    rng.shuffle(shuffled_running)
    shuffled = replace(scenario, queued=shuffled_queued, running=shuffled_running)
    assert plan_dict(plan(scenario)) == plan_dict(plan(scenario)) == plan_dict(plan(shuffled))


@EXAMPLES
@given(scenarios())
def test_held_and_paused_charts_are_never_planned(scenario: Scenario) -> None:
    result = plan(scenario)
    for chart in scenario.queued:
        if chart.paused or reference.weight_of(scenario, chart.org) == 0:
            assert chart.id not in result.order
            assert result.start[chart.id] is None
            assert result.eta[chart.id] is None


@EXAMPLES
@given(scenarios())
def test_the_high_tier_comes_first_oldest_first(scenario: Scenario) -> None:
    order = fair_order(scenario)
    high = [chart for chart in order if chart.high_priority]
    assert order[: len(high)] == high
    assert [(c.created, c.id) for c in high] == sorted((c.created, c.id) for c in high)


@EXAMPLES
@given(scenarios(max_queued=20).filter(lambda s: s.policy == "round_robin"))
def test_every_org_gets_its_first_chart_in_round_zero(scenario: Scenario) -> None:
    fair_tier = [chart for chart in fair_order(scenario) if not chart.high_priority]
    seen: Counter[str] = Counter()
    first_second_round = len(fair_tier)
    first_of_org: dict[str, int] = {}
    for position, chart in enumerate(fair_tier):
        first_of_org.setdefault(chart.org, position)
        if seen[chart.org] == reference.weight_of(scenario, chart.org):
            first_second_round = min(first_second_round, position)
        seen[chart.org] += 1
    assert all(position < first_second_round for position in first_of_org.values())


@EXAMPLES
@given(scenarios())
def test_starts_and_etas_are_the_reference_replay(scenario: Scenario) -> None:
    result = plan(scenario)
    expected_start = reference.replay(scenario, reference.fair_order(scenario))
    queued_by_id = {chart.id: chart for chart in scenario.queued}
    for chart_id, chart in queued_by_id.items():
        assert result.start[chart_id] == expected_start.get(chart_id)
        start = expected_start.get(chart_id)
        assert result.eta[chart_id] == (None if start is None else start + chart.avg)
    for running in scenario.running:
        assert result.start[running.id] == running.started
        assert result.eta[running.id] == max(scenario.now, running.started + running.avg)
    assert set(result.start) == set(result.eta) == {*queued_by_id, *(c.id for c in scenario.running)}
    finishes: defaultdict[str, list[float]] = defaultdict(list)
    for chart in [*scenario.queued, *scenario.running]:
        eta = result.eta[chart.id]
        finishes[chart.org] += [] if eta is None else [eta]
    assert result.org_clear == {org: max(etas, default=None) for org, etas in finishes.items()}
    assert result.global_clear == max((e for etas in finishes.values() for e in etas), default=None)


@EXAMPLES
@given(scenarios())
def test_the_replay_never_exceeds_the_budget_the_caps_or_the_retry_budget(scenario: Scenario) -> None:
    result = plan(scenario)
    budget = scenario.budget
    runs = [
        (result.start[c.id], result.eta[c.id], c.org, min(c.cost, budget), c.retry)
        for c in [*scenario.queued, *scenario.running]
        if result.start[c.id] is not None
    ]
    for chart in scenario.queued:
        instant = result.start[chart.id]
        if instant is None:
            continue
        assert chart.available_at is None or chart.available_at <= instant
        in_flight = [run for run in runs if run[0] <= instant < run[1]]
        assert sum(run[3] for run in in_flight) <= budget
        cap = reference.cap_of(scenario, chart.org)
        assert cap is None or sum(1 for run in in_flight if run[2] == chart.org) <= cap
        if chart.retry and scenario.retry_budget is not None:
            assert sum(run[3] for run in in_flight if run[4]) <= scenario.retry_budget


@EXAMPLES
@given(scenarios())
def test_dispatch_walk_starts_what_the_plan_starts_now(scenario: Scenario) -> None:
    still_running = [chart for chart in scenario.running if chart.started + chart.avg > scenario.now]
    started = dispatch_walk(
        fair_order(scenario),
        now=scenario.now,
        budget=scenario.budget,
        running=still_running,
        orgs=scenario.orgs,
        retry_budget=scenario.retry_budget,
    )
    result = plan(scenario)
    assert [chart.id for chart in started] == [i for i in result.order if result.start[i] == scenario.now]


@EXAMPLES
@given(scenarios())
def test_dataclasses_columns_and_json_give_one_plan(scenario: Scenario) -> None:
    from_columns = replace(scenario, queued=QueueColumns.of(scenario.queued))
    from_json = parse_scenario(scenario_json(scenario))
    assert plan_dict(plan(scenario)) == plan_dict(plan(from_columns)) == plan_dict(plan(from_json))
    assert list(from_columns.queued) == list(scenario.queued)


@EXAMPLES
@given(scenarios().flatmap(with_dues))
def test_integer_keys_plan_as_the_string_ids_they_sort_as(scenario: Scenario) -> None:
    """The live system keys its charts by integer primary keys: a scenario whose ids are integers
    (a list, or the int64 array a snapshot passes) plans as the same scenario with string ids of
    the same order, reasons and heads of line included, under the integers."""
    ids = sorted([*(chart.id for chart in scenario.queued), *(chart.id for chart in scenario.running)])
    key = {chart_id: 10 * index + 7 for index, chart_id in enumerate(ids)}
    keyed = replace(
        scenario,
        queued=[replace(chart, id=key[chart.id]) for chart in scenario.queued],
        running=[replace(chart, id=key[chart.id]) for chart in scenario.running],
    )
    columns = QueueColumns.of(keyed.queued)
    as_array = replace(keyed, queued=columns.replace(id=np.array(columns.id, dtype=np.int64)))
    expected = plan(scenario)
    for integer_keyed in (keyed, as_array):
        result = plan(integer_keyed)
        assert list(result.order) == [key[chart_id] for chart_id in expected.order]
        assert all(type(chart_id) is int for chart_id in result.order)
        for name in ("start", "eta", "eta_low", "eta_high", "reason", "waiting_until", "late_chance"):
            assert dict(getattr(result, name)) == {key[i]: v for i, v in dict(getattr(expected, name)).items()}, name
        heads = dict(expected.head_of_line)
        assert dict(result.head_of_line) == {key[i]: None if h is None else key[h] for i, h in heads.items()}


def test_the_expected_charts_key_after_integer_keys_even_with_nothing_queued() -> None:
    """Expected charts take integer keys above every real chart's, also when the queue (an empty
    id array, as a snapshot of an empty queue gives) has none and only running charts have keys."""
    running = [RunningChart(id=41, org="a", started=0, avg=10.0), RunningChart(id=7, org="b", started=0, avg=5.0)]
    empty = QueueColumns(id=np.zeros(0, dtype=np.int64), org=[], created=np.zeros(0), avg=np.zeros(0))
    arrivals = [Arrival(org="a", rate=1.0, until=20.0, avg=3.0)]
    for queued in (empty, []):
        result = plan(Scenario(now=1.0, budget=1, queued=queued, running=running, arrivals=arrivals))
        assert dict(result.eta) == {41: 10.0, 7: 5.0}
        assert list(result.order) == []


@settings(EXAMPLES, max_examples=15)
@given(
    weights=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    budget=st.integers(1, 5),
    policy=st.sampled_from(["round_robin", "deficit"]),
    quantum=st.sampled_from([1, 2, 1.5]),
    rng=st.randoms(use_true_random=False),
)
def test_a_long_saturated_replay_shares_the_pool_by_weight(
    weights: list[int], budget: int, policy: Policy, quantum: float, rng: random.Random
) -> None:
    """round_robin: starts per unit of weight; deficit: cost per unit of weight stay within a round."""
    orgs = {f"org{index}": OrgPolicy(weight=weight) for index, weight in enumerate(weights)}
    max_cost = 1 if policy == "round_robin" else 3
    queued = [
        QueuedChart(
            id=f"{name}-{k:03d}",
            org=name,
            created=rng.randrange(1_000),
            avg=rng.choice([1, 2, 3, 5]),
            cost=rng.randint(1, max_cost),
        )
        for name, org in orgs.items()
        for k in range(org.weight * 60)
    ]
    scenario = Scenario(now=0, budget=budget, policy=policy, quantum=quantum, orgs=orgs, queued=queued)
    result = plan(scenario)
    last_start = {name: max(result.start[c.id] or 0 for c in queued if c.org == name) for name in orgs}
    horizon = min(last_start.values())  # every org still has charts waiting before then
    served: Counter[str] = Counter()
    for chart in queued:
        start = result.start[chart.id]
        if start is not None and start < horizon:
            served[chart.org] += 1 if policy == "round_robin" else chart.cost
    per_weight = [served[name] / (org.weight * (quantum if policy == "deficit" else 1)) for name, org in orgs.items()]
    slack = 1 if policy == "round_robin" else 1 + max_cost / (min(weights) * quantum)
    assert max(per_weight) - min(per_weight) <= slack
    assert min(per_weight) >= 5  # the window is long enough for the shares to mean something


def test_running_charts_over_a_lowered_budget_only_pause_dispatch() -> None:
    running = [RunningChart(id=f"r{i}", org="acme", started=0, avg=10 * (i + 1)) for i in range(3)]
    queued = [QueuedChart(id="q", org="beta", created=0, avg=5)]
    result = plan(Scenario(now=0, budget=1, queued=queued, running=running))
    assert result.start["q"] == 30  # the pool holds 3 units until 10, 2 until 20, 1 until 30


@EXAMPLES
@given(
    scenarios(max_queued=8),
    st.sampled_from([2**53, -(2**53), 0, 7]),
    st.sampled_from([1e-280, 1e300, 0.1, 3]),
    st.sampled_from([1, 2**53, 2**40]),
)
def test_extreme_values_keep_the_order_exact(scenario: Scenario, priority: int, quantum: float, cost: int) -> None:
    """Priorities and costs at the edge of exact integers, tiny and huge quanta and aging steps."""
    queued = [
        replace(chart, priority=priority if index % 2 else chart.priority, cost=cost if index % 3 else chart.cost)
        for index, chart in enumerate(scenario.queued)
    ]
    aging = None if scenario.aging is None else replace(scenario.aging, step=quantum)
    extreme = replace(scenario, queued=queued, quantum=quantum, aging=aging, policy="deficit")
    assert plan(extreme).order == [chart.id for chart in reference.fair_order(extreme)]
