"""The dispatch walk, the retry-budget extension, and the core's independence from the shell."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from scheduling.core import (
    OrgPolicy,
    QueuedChart,
    RunningChart,
    Scenario,
    dispatch_walk,
    fair_order,
    plan,
)
from scheduling.core.dispatcher import BUDGET, ORG_CAP, RETRY_BUDGET, START, UNAVAILABLE, Dispatcher


def chart(chart_id: str, org: str = "acme", *, created: float = 0, **fields: Any) -> QueuedChart:
    return QueuedChart(id=chart_id, org=org, created=created, avg=10, **fields)


def walk(
    order: list[QueuedChart],
    *,
    budget: int,
    orgs: dict[str, OrgPolicy],
    running: Sequence[RunningChart] = (),
    retry_budget: int | None = None,
) -> list[str]:
    """The ids `dispatch_walk` starts at 100."""
    started = dispatch_walk(order, now=100, budget=budget, running=running, orgs=orgs, retry_budget=retry_budget)
    return [started_chart.id for started_chart in started]


def test_the_walk_stops_at_the_first_chart_the_free_budget_cannot_hold() -> None:
    order = [chart("a"), chart("b", cost=3), chart("c")]
    assert walk(order, budget=3, orgs={}) == ["a"]  # c fits, but may not overtake b


def test_a_chart_dearer_than_the_budget_runs_alone() -> None:
    assert walk([chart("big", cost=9), chart("small")], budget=4, orgs={}) == ["big"]
    assert walk([chart("big", cost=9)], budget=4, orgs={}, running=[RunningChart("r", "x", 0, 500)]) == []


def test_charts_not_yet_available_and_capped_orgs_are_skipped_not_waited_on() -> None:
    order = [
        chart("later", available_at=101),
        chart("a1"),
        chart("a2"),
        chart("b1", org="beta"),
        chart("due", org="beta", available_at=100),
    ]
    orgs = {"acme": OrgPolicy(max_concurrency=1)}
    assert walk(order, budget=10, orgs=orgs) == ["a1", "b1", "due"]


def test_running_charts_hold_their_units_and_their_org_slots() -> None:
    running = [RunningChart("r1", "acme", 0, 500), RunningChart("r2", "beta", 0, 500, cost=2)]
    order = [chart("a1"), chart("b1", org="beta"), chart("c1", org="gamma")]
    assert walk(order, budget=4, running=running, orgs={"acme": OrgPolicy(max_concurrency=1)}) == ["b1"]


def test_a_retry_budget_skips_retries_past_it_like_a_cap() -> None:
    order = [chart("r1", retry=True), chart("r2", retry=True, cost=2), chart("r3", retry=True), chart("fresh")]
    assert walk(order, budget=10, orgs={}, retry_budget=2) == ["r1", "r3", "fresh"]
    assert walk(order, budget=10, orgs={}, retry_budget=0) == ["fresh"]
    assert walk(order, budget=10, orgs={}) == ["r1", "r2", "r3", "fresh"]
    running_retry = [RunningChart("old", "acme", 0, 500, retry=True)]
    assert walk(order, budget=10, orgs={}, retry_budget=2, running=running_retry) == ["r1", "fresh"]


def test_without_a_retry_budget_retry_marks_change_no_plan() -> None:
    queued = [chart(f"q{i}", org=f"org{i % 3}", retry=i % 2 == 0, cost=1 + i % 3) for i in range(12)]
    marked = Scenario(now=0, budget=3, queued=queued, orgs={"org1": OrgPolicy(max_concurrency=1)})
    unmarked = Scenario(now=0, budget=3, queued=[chart(c.id, c.org, cost=c.cost) for c in queued], orgs=marked.orgs)
    assert plan(marked) == plan(unmarked)


def test_a_retry_dearer_than_the_retry_budget_never_starts() -> None:
    result = plan(Scenario(now=0, budget=5, queued=[chart("r", retry=True, cost=3), chart("f")], retry_budget=2))
    assert (result.start["r"], result.eta["r"]) == (None, None)
    assert result.start["f"] == 0
    assert result.org_clear == {"acme": 10}


def test_the_dispatcher_can_be_fed_one_chart_at_a_time() -> None:
    """The live dispatcher extends the dispatcher's columns as it pages through the queue."""
    units: list[int] = []
    org: list[int] = []
    available_at: list[float | None] = []
    retry: list[bool] = []
    dispatcher = Dispatcher(
        budget=3, caps=[1, None], org=org, units=units, available_at=available_at, retry=retry, retry_budget=1
    )
    verdicts = []
    for index, (chart_org, chart_units, ready_at, is_retry) in enumerate(
        [
            (0, 1, None, False),
            (0, 1, None, False),
            (1, 1, 200.0, False),
            (1, 1, None, True),
            (1, 1, None, True),
            (1, 2, None, False),
        ]
    ):
        org.append(chart_org)
        units.append(chart_units)
        available_at.append(ready_at)
        retry.append(is_retry)
        verdicts.extend(verdict for _, verdict in dispatcher.walk([index], 100))
    assert verdicts == [START, ORG_CAP, UNAVAILABLE, START, RETRY_BUDGET, BUDGET]
    assert dispatcher.free_budget == 1


def test_the_plan_of_an_empty_scenario_is_empty() -> None:
    result = plan(Scenario(now=5, budget=1))
    assert (result.order, dict(result.start), dict(result.eta), result.org_clear, result.global_clear) == (
        [],
        {},
        {},
        {},
        None,
    )


def test_fair_order_matches_the_worked_example() -> None:
    queued = [
        chart(chart_id, org, created=created)
        for created, (chart_id, org) in enumerate(
            [("A", "1"), ("B", "1"), ("C", "2"), ("D", "1"), ("E", "2"), ("F", "3"), ("G", "1")]
        )
    ]
    scenario = Scenario(now=0, budget=3, orgs={"1": OrgPolicy(weight=2)}, queued=queued)
    assert [c.id for c in fair_order(scenario)] == list("ABCFDEG")


def test_the_core_imports_nothing_from_the_shell() -> None:
    shell = ("django", "celery", "channels", "temporalio", "rest_framework", "orgs", "charts", "fairsched")
    probe = (
        "import json, sys, scheduling.core, scheduling.core.__main__; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {shell!r})))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == []
