"""Shared by the core's tests: Hypothesis strategies for small scenarios dense in ties and edge
cases, their JSON, and a switch between the two replays."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any
from unittest import mock

from hypothesis import strategies as st

from scheduling.core import Aging, OrgPolicy, QueuedChart, RunningChart, Scenario
from scheduling.core import planner as planner_module

ORG_NAMES = ("acme", "beta", "gamma", "delta")
# Few distinct values, so that created times, durations and finishes tie often; ints and floats mixed.
TIMES = st.sampled_from([0, 1, 2, 3, 5, 8, 2.5, 0.25])
DURATIONS = st.sampled_from([1, 2, 3, 5, 10, 0.5, 2.5])
RARELY = st.sampled_from([False, False, False, True])
CHART_IDS = st.text(alphabet="abxz019", min_size=1, max_size=3)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    max_queued: int = 12,
    caps: bool = True,
    availability: bool = True,
    retry_budget: bool = True,
) -> Scenario:
    """A scenario of up to `max_queued` charts; the flags allow caps, backoff and a retry budget."""
    now = draw(st.sampled_from([0, 4, 10, 2.5]))
    budget = draw(st.integers(1, 6))
    org_names = ORG_NAMES[: draw(st.integers(1, len(ORG_NAMES)))]
    orgs = {}
    for name in org_names:
        if draw(st.booleans()):
            cap = draw(st.none() | st.integers(1, 3)) if caps else None
            orgs[name] = OrgPolicy(weight=draw(st.integers(0, 3)), max_concurrency=cap)
    budget_for_retries = draw(st.none() | st.integers(0, 4)) if retry_budget else None
    # Retries are common when a retry budget makes them matter.
    retries = RARELY if budget_for_retries is None else st.booleans()
    queued_count = draw(st.integers(0, max_queued))
    running_count = draw(st.integers(0, 3))
    ids = draw(
        st.lists(CHART_IDS, min_size=queued_count + running_count, max_size=queued_count + running_count, unique=True)
    )
    queued = [
        QueuedChart(
            id=ids[index],
            org=draw(st.sampled_from(org_names)),
            created=draw(TIMES),
            avg=draw(DURATIONS),
            cost=draw(st.integers(1, budget + 2)),
            high_priority=draw(RARELY),
            paused=draw(RARELY),
            priority=draw(st.integers(-1, 2)),
            available_at=now + draw(TIMES) if availability and draw(RARELY) else None,
            retry=draw(retries),
        )
        for index in range(queued_count)
    ]
    running = [
        RunningChart(
            id=ids[queued_count + index],
            org=draw(st.sampled_from(org_names)),
            started=now - draw(TIMES),
            avg=draw(DURATIONS),
            cost=draw(st.integers(1, budget + 1)),
            retry=draw(retries),
        )
        for index in range(running_count)
    ]
    return Scenario(
        now=now,
        budget=budget,
        policy=draw(st.sampled_from(["round_robin", "deficit"])),
        quantum=draw(st.sampled_from([1, 2, 0.5, 1.5])),
        aging=draw(st.none() | st.builds(Aging, step=st.sampled_from([1, 2.5, 3]), cap=st.integers(0, 3))),
        orgs=orgs,
        queued=queued,
        running=running,
        retry_budget=budget_for_retries,
    )


@st.composite
def with_dues(draw: st.DrawFn, scenario: Scenario, *, spreads: bool = True) -> Scenario:
    """`scenario` with a due time on some of its charts (often at a chart's ETA or the clock's
    ties), due first on or off and, with `spreads`, sometimes a spread on each, so that late
    chances come with a band."""
    dues = st.none() | st.sampled_from([0, 1, 2.5, 5, 8, 12, 20]).map(lambda offset: scenario.now + offset)
    queued = [replace(chart, due=draw(dues)) for chart in scenario.queued]
    running = [replace(chart, due=draw(dues)) for chart in scenario.running]
    spread: list[float] = []
    running_spread: list[float] = []
    if spreads and draw(st.booleans()):
        sigmas = st.sampled_from([0.0, 0.3, 1.0])
        spread = [draw(sigmas) for _ in queued]
        running_spread = [draw(sigmas) for _ in running]
    return replace(
        scenario, queued=queued, running=running, spread=spread, running_spread=running_spread,
        due_first=draw(st.booleans()),
    )  # fmt: skip


def scenario_json(scenario: Scenario) -> dict[str, Any]:
    """The scenario as the plan command reads it."""
    data: dict[str, Any] = {
        "now": scenario.now,
        "budget": scenario.budget,
        "policy": scenario.policy,
        "quantum": scenario.quantum,
        "orgs": {
            name: {"weight": org.weight, "max_concurrency": org.max_concurrency} for name, org in scenario.orgs.items()
        },
        "queued": [
            {
                "id": chart.id,
                "org": chart.org,
                "created": chart.created,
                "avg": chart.avg,
                "cost": chart.cost,
                "high_priority": chart.high_priority,
                "paused": chart.paused,
                "priority": chart.priority,
                "available_at": chart.available_at,
                "retry": chart.retry,
            }
            for chart in scenario.queued
        ],
        "running": [
            {
                "id": chart.id,
                "org": chart.org,
                "started": chart.started,
                "avg": chart.avg,
                "cost": chart.cost,
                "retry": chart.retry,
            }
            for chart in scenario.running
        ],
        "retry_budget": scenario.retry_budget,
    }
    if scenario.aging is not None:
        data["aging"] = {"step": scenario.aging.step, "cap": scenario.aging.cap}
    return data


@contextmanager
def replay_forced(*, lanes: bool) -> Iterator[None]:
    """Make `plan` take the lane simulation (to be used only where it applies) or the event replay."""
    with mock.patch.object(planner_module, "lanes_apply", return_value=lanes):
        yield
