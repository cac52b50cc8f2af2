"""Why each waiting chart waits: the walk's verdicts at `now`, in the plan."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings

from scheduling.core import OrgPolicy, QueuedChart, RunningChart, Scenario, fair_order, plan
from scheduling.core.dispatcher import (
    BUDGET,
    CHART_PAUSED,
    ORG_CAP,
    ORG_HELD,
    RETRY_BUDGET,
    START,
    TURN,
    UNAVAILABLE,
    Dispatcher,
)
from scheduling.core.order import DEFAULT_POLICY, org_codes

from . import reference
from .support import replay_forced, scenarios

EXAMPLES = settings(max_examples=200, deadline=None, database=None)
SKIPPED = {UNAVAILABLE, ORG_CAP, RETRY_BUDGET}


def chart(chart_id: str, org: str = "acme", **fields: Any) -> QueuedChart:
    return QueuedChart(id=chart_id, org=org, created=fields.pop("created", 0), avg=fields.pop("avg", 10), **fields)


def reasons(scenario: Scenario) -> dict[str, tuple[str | None, float | None, str | None]]:
    result = plan(scenario)
    return {c.id: (result.reason[c.id], result.waiting_until[c.id], result.head_of_line[c.id]) for c in scenario.queued}


def test_the_head_of_the_line_waits_for_budget_and_a_chart_that_fits_behind_it_names_it() -> None:
    running = [RunningChart("r", "other", started=0, avg=30)]
    queued = [chart("a", created=0), chart("big", created=1, cost=3), chart("small", created=2)]
    assert reasons(Scenario(now=0, budget=3, queued=queued, running=running)) == {
        "a": (None, None, None),  # starts now
        "big": ("budget", 30, None),
        "small": ("budget", 40, "big"),
    }


def test_a_chart_that_the_free_budget_cannot_hold_behind_the_head_waits_its_turn() -> None:
    queued = [chart("a", created=0), chart("b", created=1), chart("c", created=2, cost=2)]
    assert reasons(Scenario(now=0, budget=1, queued=queued)) == {
        "a": (None, None, None),
        "b": ("budget", 10, None),
        "c": ("turn", 20, None),
    }


def test_a_capped_org_a_backoff_and_the_retry_budget_each_name_their_block() -> None:
    queued = [
        chart("a1", created=0),
        chart("a2", created=1),
        chart("later", org="beta", created=0, available_at=25),
        chart("retry", org="gamma", created=0, retry=True, cost=2),
    ]
    scenario = Scenario(now=0, budget=10, orgs={"acme": OrgPolicy(max_concurrency=1)}, queued=queued, retry_budget=1)
    assert reasons(scenario) == {
        "a1": (None, None, None),
        "a2": ("org_cap", 10, None),
        "later": ("unavailable", 25, None),
        "retry": ("retry_budget", None, None),  # dearer than the whole retry budget: never starts
    }


def test_held_orgs_and_paused_charts_are_left_out_with_their_reason() -> None:
    queued = [chart("held", org="frozen"), chart("paused", paused=True), chart("both", org="frozen", paused=True)]
    scenario = Scenario(now=0, budget=2, orgs={"frozen": OrgPolicy(weight=0)}, queued=queued)
    assert reasons(scenario) == {
        "held": ("org_held", None, None),
        "paused": ("chart_paused", None, None),
        "both": ("org_held", None, None),
    }


def test_running_charts_have_no_reason() -> None:
    result = plan(Scenario(now=5, budget=1, running=[RunningChart("r", "acme", started=0, avg=10)]))
    assert (result.reason["r"], result.waiting_until["r"], result.head_of_line["r"]) == (None, None, None)


def walked_reasons(scenario: Scenario) -> dict[str, tuple[str | None, str | None]]:
    """The reference: `Dispatcher.decide` over the whole order at `now`; past the stop, each chart is
    decided on a copy of the state there (what the walk would say had the head let it by)."""
    now, budget = scenario.now, scenario.budget
    order = fair_order(scenario)
    running = [c for c in scenario.running if c.started + c.avg > now]
    codes, names = org_codes([*(c.org for c in order), *(c.org for c in running)])
    columns: dict[str, Any] = {
        "caps": [scenario.orgs.get(name, DEFAULT_POLICY).max_concurrency for name in names],
        "org": codes,
        "units": [min(c.cost, budget) for c in order],
        "available_at": [c.available_at for c in order],
        "retry": [c.retry for c in order],
    }
    walk = Dispatcher(budget=budget, retry_budget=scenario.retry_budget, **columns)
    for index, running_chart in enumerate(running, start=len(order)):
        walk.occupy(codes[index], min(running_chart.cost, budget), running_chart.retry)
    found: dict[str, tuple[str | None, str | None]] = {}
    head: str | None = None
    for index, queued in enumerate(order):
        if head is None:
            verdict = walk.decide(index, now)
            if verdict is START:
                found[queued.id] = (None, None)
            elif verdict in SKIPPED:
                found[queued.id] = (verdict, None)
            else:
                head = queued.id
                found[queued.id] = (BUDGET, None)
            continue
        probe = Dispatcher(budget=walk.free_budget, retry_budget=walk.retry_free, **columns)
        probe.org_running = list(walk.org_running)
        verdict = probe.decide(index, now)
        if verdict in SKIPPED:
            found[queued.id] = (verdict, None)
        else:
            found[queued.id] = (BUDGET, head) if verdict is START else (TURN, None)
    return found


def test_a_chart_skipped_before_a_start_of_its_org_gets_the_check_it_failed_then() -> None:
    """The walk meets the retry first, while acme runs nothing: the retry budget stops it, not the
    cap that the plain chart after it fills (found by the property test below)."""
    scenario = Scenario(
        now=0,
        budget=1,
        policy="round_robin",
        orgs={"acme": OrgPolicy(weight=1, max_concurrency=1)},
        queued=[
            QueuedChart(id="retry", org="acme", created=0, avg=1, cost=1, priority=1, retry=True),
            QueuedChart(id="p1", org="acme", created=0, avg=1, cost=1),
            QueuedChart(id="p2", org="acme", created=0, avg=1, cost=1),
        ],
        retry_budget=0,
    )
    result = plan(scenario)
    assert result.order == ["retry", "p1", "p2"]
    assert [result.reason[chart] for chart in result.order] == [RETRY_BUDGET, None, ORG_CAP]
    assert walked_reasons(scenario) == {
        "retry": (RETRY_BUDGET, None),
        "p1": (None, None),
        "p2": (ORG_CAP, None),
    }


@EXAMPLES
@given(scenarios())
def test_every_reason_is_the_walks_verdict_at_now(scenario: Scenario) -> None:
    result = plan(scenario)
    expected = walked_reasons(scenario)
    for chart_id in result.order:
        assert (result.reason[chart_id], result.head_of_line[chart_id]) == expected[chart_id]


@EXAMPLES
@given(scenarios(caps=False, availability=False, retry_budget=False))
def test_the_lane_simulation_and_the_event_replay_give_the_same_reasons(scenario: Scenario) -> None:
    with replay_forced(lanes=True):
        by_lanes = plan(scenario)
    with replay_forced(lanes=False):
        by_events = plan(scenario)
    for field in ("reason", "waiting_until", "head_of_line"):
        assert dict(getattr(by_lanes, field)) == dict(getattr(by_events, field))


@EXAMPLES
@given(scenarios())
def test_budget_and_turn_start_when_the_replay_says_and_every_other_reason_names_its_block(
    scenario: Scenario,
) -> None:
    result = plan(scenario)
    now, budget = scenario.now, scenario.budget
    replayed = reference.replay(scenario, reference.fair_order(scenario))
    starts = {c.id: result.start[c.id] for c in scenario.queued}
    in_flight = [
        (c.org, min(c.cost, budget), c.retry)
        for c in [*scenario.running, *scenario.queued]
        if (start := result.start[c.id]) is not None and start <= now < result.eta[c.id]  # type: ignore[operator]
    ]
    for queued in scenario.queued:
        reason, until = result.reason[queued.id], result.waiting_until[queued.id]
        if reason is None:
            assert starts[queued.id] == now
        elif reason in (BUDGET, TURN):
            assert until == starts[queued.id] == replayed[queued.id]
            assert until is not None
            assert until > now
        elif reason == UNAVAILABLE:
            assert until == queued.available_at
            assert queued.available_at > now
        elif reason == ORG_CAP:
            cap = reference.cap_of(scenario, queued.org)
            assert cap is not None
            assert sum(1 for org, _, _ in in_flight if org == queued.org) >= cap
        elif reason == RETRY_BUDGET:
            assert queued.retry
            assert scenario.retry_budget is not None
            in_use = sum(units for _, units, retry in in_flight if retry)
            assert in_use + min(queued.cost, budget) > scenario.retry_budget
        elif reason == ORG_HELD:
            assert reference.weight_of(scenario, queued.org) == 0
        else:
            assert reason == CHART_PAUSED
            assert queued.paused
