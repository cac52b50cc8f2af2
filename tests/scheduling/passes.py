"""The real replan and dispatch passes over PostgreSQL, with Temporal faked: a start returns a run
id at once, and a finish is what reconcile would record for a completed workflow."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from django.utils import timezone

from charts.models import CLAIMABLE_STATES, IN_FLIGHT_STATES, Chart, ChartState
from charts.services import ChartRequest, chart_submit_bulk
from charts.states import transition_if
from common.actors import RECONCILER, Actor
from orgs.models import Org
from scheduling.dispatch import dispatch_run
from scheduling.replan import plan_refresh

ACTOR = Actor("user:test", staff=True)


def fake_temporal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workflows start at once; levers' after-commit replan requests go nowhere (the test drives)."""
    monkeypatch.setattr("scheduling.dispatch.start_chart_workflow", lambda **kw: f"run-{kw['workflow_id']}")
    monkeypatch.setattr("common.events.request_replan", lambda: None)


def submit(org: Org, workflow: str, count: int, *, prefix: str | None = None) -> list[Chart]:
    prefix = prefix if prefix is not None else org.slug
    existing = Chart.objects.filter(org=org).count()
    items = [ChartRequest(workflow, f"{prefix}{existing + i}") for i in range(count)]
    return [chart for chart, _ in chart_submit_bulk(org=org, items=items, actor=ACTOR)]


def replan_and_dispatch() -> list[str]:
    """One replan then one dispatch; the slugs of the orgs whose charts started, in start order."""
    plan_refresh()
    return dispatch()


def dispatch() -> list[str]:
    """One dispatch; the slugs of the orgs whose charts started, in start order."""
    started = dispatch_run().started
    slug = dict(Chart.objects.filter(pk__in=started).values_list("pk", "org__slug"))
    return [slug[pk] for pk in started]


def finish(count: int | None = None, *, orgs: Sequence[str] | None = None) -> int:
    """Complete the `count` oldest running charts (all by default), as reconcile would."""
    running = Chart.objects.filter(state__in=IN_FLIGHT_STATES).order_by("claimed_at", "pk")
    if orgs is not None:
        running = running.filter(org__slug__in=orgs)
    ids = list(running.values_list("pk", flat=True)[:count])
    now = timezone.now()
    for chart_id in ids:
        transition_if(
            chart_id, IN_FLIGHT_STATES, ChartState.SUCCEEDED, actor=RECONCILER, reason="workflow completed",
            started_at=now, finished_at=now,
        )  # fmt: skip
    return len(ids)


def fair_order() -> list[str]:
    """The org slug of each waiting chart of the fair tier, in the persisted fair order."""
    return list(
        Chart.objects.filter(plan__position__isnull=False, high_priority=False, state__in=CLAIMABLE_STATES)
        .order_by("plan__position")
        .values_list("org__slug", flat=True)
    )
