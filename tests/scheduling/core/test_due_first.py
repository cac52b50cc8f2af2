"""Due first inside the share (`Scenario.due_first`, `order._due_first`): each org's charts ordered by
due time in their own places, the rounds across orgs those of the contract."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import OrgPolicy, QueuedChart, Scenario, fair_order, plan
from scheduling.core.order import effective_priority
from tests.scheduling.core.support import scenarios, with_dues

EXAMPLES = settings(max_examples=300, deadline=None, database=None)


def without_dues(scenario: Scenario) -> Scenario:
    return replace(scenario, queued=[replace(chart, due=None) for chart in scenario.queued], due_first=False)


def due_scenarios(**options: bool) -> st.SearchStrategy[Scenario]:
    return scenarios(**options).flatmap(lambda scenario: with_dues(scenario, spreads=False))


def classes(scenario: Scenario, order: list[QueuedChart]) -> list[tuple[str, bool, int]]:
    """Each place of `order`: its org, tier and (in the fair tier) effective priority."""
    created = np.array([chart.created for chart in order], dtype=np.float64)
    priority = effective_priority(np.array([chart.priority for chart in order], dtype=np.int64), scenario.now,
                                  scenario.aging, created).tolist()  # fmt: skip
    return [
        (chart.org, chart.high_priority, 0 if chart.high_priority else chart_priority)
        for chart, chart_priority in zip(order, priority, strict=True)
    ]


@EXAMPLES
@given(due_scenarios())
def test_off_or_without_due_times_the_order_is_the_contract_s(scenario: Scenario) -> None:
    today = fair_order(without_dues(scenario))
    assert [chart.id for chart in fair_order(replace(scenario, due_first=False))] == [chart.id for chart in today]
    no_dues = replace(without_dues(scenario), due_first=True)
    assert [chart.id for chart in fair_order(no_dues)] == [chart.id for chart in today]


@EXAMPLES
@given(st.data())
def test_on_every_place_keeps_its_org_tier_and_priority(data: st.DataObject) -> None:
    """So each org's count per round is the contract's (shares follow weights): under round_robin a
    round is a count of charts; under deficit, a count of charts where every chart costs alike."""
    scenario = replace(data.draw(due_scenarios()), due_first=True)
    if scenario.policy == "deficit":
        scenario = replace(scenario, queued=[replace(chart, cost=1) for chart in scenario.queued])
    order = fair_order(scenario)
    today = fair_order(without_dues(scenario))
    assert sorted(chart.id for chart in order) == sorted(chart.id for chart in today)
    assert classes(scenario, order) == classes(scenario, today)


@EXAMPLES
@given(due_scenarios())
def test_on_the_dues_of_each_org_never_fall_within_a_tier_and_priority(scenario: Scenario) -> None:
    scenario = replace(scenario, due_first=True)
    order = fair_order(scenario)
    last: dict[tuple[str, bool, int], float] = {}
    for chart, place in zip(order, classes(scenario, order), strict=True):
        due = math.inf if chart.due is None else chart.due
        assert due >= last.get(place, -math.inf), (chart.id, place)
        last[place] = due


@EXAMPLES
@given(due_scenarios())
def test_on_under_deficit_an_org_spends_no_more_per_round_than_its_quantum(scenario: Scenario) -> None:
    """Each org's cost through its k-th chart of the fair tier stays within the rounds the contract
    gives it: ceil(S_k / (weight x quantum)) rounds, so the fair tier's charts come by that round."""
    scenario = replace(scenario, due_first=True, policy="deficit")
    order = [chart for chart in fair_order(scenario) if not chart.high_priority]
    spent: dict[str, float] = {}
    rounds = []
    for chart in order:
        spent[chart.org] = spent.get(chart.org, 0) + chart.cost
        weight = scenario.orgs.get(chart.org, OrgPolicy()).weight
        rounds.append(math.ceil(spent[chart.org] / (weight * scenario.quantum)))
    assert rounds == sorted(rounds)


def test_an_org_s_deadline_never_takes_another_org_s_turn() -> None:
    queued = [
        QueuedChart(id="a1", org="a", created=0, avg=10, due=500),
        QueuedChart(id="b1", org="b", created=1, avg=10),
        QueuedChart(id="a2", org="a", created=2, avg=10, due=15),
        QueuedChart(id="b2", org="b", created=3, avg=10),
        QueuedChart(id="a3", org="a", created=4, avg=10),
    ]
    scenario = Scenario(now=0, budget=1, queued=queued, due_first=True)
    result = plan(scenario)
    assert list(result.order) == ["a2", "b1", "a1", "b2", "a3"]
    assert list(plan(replace(scenario, due_first=False)).order) == ["a1", "b1", "a2", "b2", "a3"]
    assert result.late_chance == {"a2": 0.0, "b1": None, "a1": 0.0, "b2": None, "a3": None}
