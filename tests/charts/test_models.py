"""The database keeps charts consistent even when a write bypasses the services."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from django.db import IntegrityError, transaction

from charts.models import Chart, ChartEvent, ChartState, DurationStat
from tests.conftest import Tenants
from tests.factories import ChartFactory

pytestmark = pytest.mark.django_db


def violates(write: Callable[[], object]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        write()


def test_external_id_is_unique_per_org_only(tenants: Tenants) -> None:
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="job-1")
    violates(lambda: ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="job-1"))
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, external_id="job-1")
    assert Chart.objects.filter(external_id="job-1").count() == 2


def test_cost_is_empty_or_at_least_one(tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    violates(lambda: Chart.objects.filter(pk=chart.pk).update(cost=0))
    Chart.objects.filter(pk=chart.pk).update(cost=1)


def test_state_must_be_a_known_state(tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    violates(lambda: Chart.objects.filter(pk=chart.pk).update(state="exploded"))


def test_an_org_or_workflow_with_charts_cannot_be_deleted(tenants: Tenants) -> None:
    from django.db.models import ProtectedError

    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    with pytest.raises(ProtectedError):
        tenants.org_a.delete()
    with pytest.raises(ProtectedError):
        tenants.workflow.delete()


def test_a_new_chart_is_queued_and_reads_well(tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="job-7")
    assert chart.state == ChartState.QUEUED
    assert not chart.is_terminal
    assert str(chart) == "acme/job-7"
    event = ChartEvent.objects.create(chart=chart, from_state="", to_state="queued", actor="user:alice")
    assert str(event) == f"{chart.pk}: - -> queued by user:alice"


@pytest.mark.parametrize("state", ChartState.values)
def test_terminal_states(tenants: Tenants, state: str) -> None:
    chart = Chart(org=tenants.org_a, workflow=tenants.workflow, state=state)
    assert chart.is_terminal == (state in {"succeeded", "failed", "cancelled"})


def test_duration_stat_mean_and_spread(tenants: Tenants) -> None:
    stat = DurationStat(org=tenants.org_a, workflow=tenants.workflow)
    assert stat.mean is None
    assert stat.log_sigma is None
    durations = [10.0, 40.0]
    stat.count = len(durations)
    stat.total_seconds = sum(durations)
    stat.sum_log = sum(math.log(d) for d in durations)
    stat.sum_log_sq = sum(math.log(d) ** 2 for d in durations)
    stat.save()
    assert stat.mean == 25.0
    assert stat.log_sigma == pytest.approx(math.log(2))
    assert str(stat) == "Acme render: 2 runs"
    with transaction.atomic(), pytest.raises(IntegrityError):
        DurationStat.objects.create(org=tenants.org_a, workflow=tenants.workflow)
