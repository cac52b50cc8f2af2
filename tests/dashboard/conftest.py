"""Fixtures for the dashboard: staff and non-staff clients, and a queue with a plan written in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import Chart, ChartPlan, ChartState
from common import events
from orgs.models import Org, Workflow
from tests.conftest import Tenants


@pytest.fixture(autouse=True)
def no_replan_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replan task is the lead's loop; here a change only needs to be announced."""
    monkeypatch.setattr(events, "request_replan", lambda: None)


@pytest.fixture
def staff_client(tenants: Tenants) -> Client:
    client = Client()
    client.force_login(tenants.staff)
    return client


@pytest.fixture
def member_client(tenants: Tenants) -> Client:
    client = Client()
    client.force_login(tenants.member_a)
    return client


def plan_queue(
    orgs: Sequence[Org], workflow: Workflow, count: int, *, state: str = ChartState.QUEUED, batch: int = 5000
) -> list[Chart]:
    """Insert `count` waiting charts spread round-robin over `orgs`, with positions 0..count-1 and a
    predicted start and ETA each, as a replan would have written them."""
    now = timezone.now()
    charts = [
        Chart(
            org=orgs[i % len(orgs)],
            workflow=workflow,
            external_id=f"q-{i}",
            state=state,
            created_at=now - timedelta(seconds=count - i),
        )
        for i in range(count)
    ]
    charts = Chart.objects.bulk_create(charts, batch_size=batch)
    ChartPlan.objects.bulk_create(
        (
            ChartPlan(
                chart=chart,
                position=i,
                predicted_start=now + timedelta(seconds=10 * i),
                eta=now + timedelta(seconds=10 * i + 60),
            )
            for i, chart in enumerate(charts)
        ),
        batch_size=batch,
    )
    return charts
