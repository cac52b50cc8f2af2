"""A deliberately simple second reading of the contract, for the property tests to compare against.

Nothing here is shared with `scheduling.core` but the input dataclasses: the fair order is one Python
sort, and the replay ticks from decision instant to decision instant, re-walking the whole order at
each one (quadratic, fine for the small scenarios the tests draw).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from scheduling.core import OrgPolicy, QueuedChart, Scenario


def weight_of(scenario: Scenario, org: str) -> int:
    return scenario.orgs.get(org, OrgPolicy()).weight


def cap_of(scenario: Scenario, org: str) -> int | None:
    return scenario.orgs.get(org, OrgPolicy()).max_concurrency


def effective_priority(scenario: Scenario, chart: QueuedChart) -> int:
    if scenario.aging is None:
        return chart.priority
    waited = max(0, scenario.now - chart.created)
    return chart.priority + min(scenario.aging.cap, math.floor(waited / scenario.aging.step))


def eligible(scenario: Scenario) -> list[QueuedChart]:
    return [chart for chart in scenario.queued if not chart.paused and weight_of(scenario, chart.org) > 0]


def rounds(scenario: Scenario) -> dict[str, int]:
    """The round of every eligible chart of the fair tier, by id."""
    by_org: dict[str, list[QueuedChart]] = defaultdict(list)
    fair = [chart for chart in eligible(scenario) if not chart.high_priority]
    for chart in sorted(fair, key=lambda c: (-effective_priority(scenario, c), c.created, c.id)):
        by_org[chart.org].append(chart)
    round_of = {}
    for org, charts in by_org.items():
        weight = weight_of(scenario, org)
        spent = 0
        for k, chart in enumerate(charts):
            spent += chart.cost
            if scenario.policy == "round_robin":
                round_of[chart.id] = k // weight
            else:
                round_of[chart.id] = math.ceil(spent / (weight * scenario.quantum)) - 1
    return round_of


def fair_order(scenario: Scenario) -> list[QueuedChart]:
    """High tier by (created, id), then the fair tier by (round, -effective priority, created, id)."""
    high = sorted((c for c in eligible(scenario) if c.high_priority), key=lambda c: (c.created, c.id))
    round_of = rounds(scenario)
    fair = sorted(
        (c for c in eligible(scenario) if not c.high_priority),
        key=lambda c: (round_of[c.id], -effective_priority(scenario, c), c.created, c.id),
    )
    return high + fair


@dataclass
class Run:
    """A chart in flight during the replay."""

    org: str
    units: int
    retry: bool
    finish: float


def replay(scenario: Scenario, order: list[QueuedChart]) -> dict[str, float]:
    """The start of every chart of `order` that ever starts, by id.

    At each instant: drop the runs finished by then, walk the whole order from the head over the
    charts not yet started, then move to the next finish or `available_at` still ahead.
    """
    budget, retry_budget = scenario.budget, scenario.retry_budget
    runs = [
        Run(chart.org, min(chart.cost, budget), chart.retry, max(scenario.now, chart.started + chart.avg))
        for chart in scenario.running
    ]
    waiting = list(order)
    start: dict[str, float] = {}
    instant = scenario.now
    while True:
        runs = [run for run in runs if run.finish > instant]
        free = budget - sum(run.units for run in runs)
        for chart in list(waiting):
            units = min(chart.cost, budget)
            running_in_org = sum(1 for run in runs if run.org == chart.org)
            retry_units = sum(run.units for run in runs if run.retry)
            cap = cap_of(scenario, chart.org)
            if chart.available_at is not None and chart.available_at > instant:
                continue
            if cap is not None and running_in_org >= cap:
                continue
            if chart.retry and retry_budget is not None and retry_units + units > retry_budget:
                continue
            if units > free:
                break
            start[chart.id] = instant
            runs.append(Run(chart.org, units, chart.retry, instant + chart.avg))
            free -= units
            waiting.remove(chart)
        ahead = [run.finish for run in runs]
        ahead += [c.available_at for c in waiting if c.available_at is not None and c.available_at > instant]
        if not ahead:
            return start
        instant = min(ahead)
