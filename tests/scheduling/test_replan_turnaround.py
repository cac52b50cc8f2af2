"""The replan's turnaround wiring on PostgreSQL: due times into the core, late chances into the plan
table, the due-first switch into the order."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from charts.models import Chart, ChartPlan, ChartState
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.models import Org
from scheduling import core
from scheduling.reconcile import duration_record
from scheduling.replan import plan_refresh
from scheduling.snapshot import load_snapshot
from tests.factories import OrgFactory, WorkflowFactory

pytestmark = pytest.mark.django_db
ACTOR = Actor("user:test", staff=True)


@pytest.fixture
def backlog() -> Org:
    """One org's four charts under a budget of 1, durations learned with a spread."""
    scheduler_config_set(actor=ACTOR, budget=1)
    workflow = WorkflowFactory(name="w")
    acme = OrgFactory(slug="acme")
    for seconds in (40, 60, 90):
        duration_record(org_id=acme.pk, workflow_id=workflow.pk, seconds=seconds)
    chart_submit_bulk(org=acme, items=[ChartRequest("w", f"acme{i}") for i in range(4)], actor=ACTOR)
    return acme


def late_chances() -> dict[str, float | None]:
    return dict(ChartPlan.objects.values_list("chart__external_id", "late_chance"))


def test_without_due_times_every_late_chance_is_null(backlog: Org) -> None:
    plan_refresh()
    assert late_chances() == dict.fromkeys(["acme0", "acme1", "acme2", "acme3"])


def test_a_due_time_before_the_eta_is_more_likely_late_than_not(backlog: Org) -> None:
    now = timezone.now()
    Chart.objects.filter(external_id="acme3").update(due_at=now)
    Chart.objects.filter(external_id="acme0").update(due_at=now + timedelta(days=1))
    plan_refresh(now=now)
    chances = late_chances()
    late, early = chances["acme3"], chances["acme0"]
    assert late is not None
    assert late > 0.5
    assert early is not None
    assert early < 0.5
    assert chances["acme1"] is None
    assert chances["acme2"] is None


def test_the_snapshot_reads_due_times_and_the_due_first_switch(backlog: Org) -> None:
    now = timezone.now().replace(microsecond=250_000)
    Chart.objects.filter(external_id="acme2").update(due_at=now)
    SchedulerConfig.objects.update(due_first=True)  # (no lever of the config sets it yet)
    scenario = load_snapshot(now=now).scenario
    queue = core.QueueColumns.of(scenario.queued)
    due = {key: value for key, value in zip(queue.id, queue.due, strict=True) if value is not None}
    assert due == {Chart.objects.get(external_id="acme2").pk: now.timestamp()}
    assert scenario.due_first


def test_a_running_chart_gets_its_late_chance(backlog: Org) -> None:
    now = timezone.now()
    first = Chart.objects.get(external_id="acme0")
    Chart.objects.filter(pk=first.pk).update(
        state=ChartState.RUNNING, claimed_at=now, started_at=now, attempt=1, due_at=now - timedelta(seconds=1)
    )
    plan_refresh(now=now)
    assert late_chances()["acme0"] == 1.0  # past due and not finished


def test_due_first_reorders_an_org_s_charts_by_due_time_at_the_next_replan(backlog: Org) -> None:
    now = timezone.now()
    Chart.objects.filter(external_id="acme3").update(due_at=now + timedelta(minutes=5))
    Chart.objects.filter(external_id="acme1").update(due_at=now + timedelta(minutes=9))
    plan_refresh(now=now)
    order = list(Chart.objects.order_by("plan__position").values_list("external_id", flat=True))
    assert order == ["acme0", "acme1", "acme2", "acme3"]
    SchedulerConfig.objects.update(due_first=True)
    plan_refresh(now=now)
    order = list(Chart.objects.order_by("plan__position").values_list("external_id", flat=True))
    assert order == ["acme3", "acme1", "acme0", "acme2"]
