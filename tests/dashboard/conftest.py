"""Fixtures for the dashboard: staff and non-staff clients, and a queue with a plan written in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
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


def plan_queue(orgs: Sequence[Org], workflow: Workflow, count: int, *, state: str = ChartState.QUEUED) -> list[Chart]:
    """Insert `count` waiting charts spread round-robin over `orgs`, with positions 0..count-1 and a
    predicted start and ETA each, as a replan would have written them.

    The first chart and its plan row are made by the ORM; the others are copies of them made in
    PostgreSQL, one `INSERT ... SELECT` over `generate_series` for each table, with only the org, the
    external id, the creation time, the position and the times changed: a deep queue costs two
    statements, not thousands of model instances."""
    now = timezone.now()
    first = Chart.objects.create(
        org=orgs[0], workflow=workflow, external_id="q-0", state=state, created_at=now - timedelta(seconds=count)
    )
    ChartPlan.objects.create(chart=first, position=0, predicted_start=now, eta=now + timedelta(seconds=60))
    if count > 1:
        _copy_rows(
            Chart,
            {
                "org_id": "(%(orgs)s::bigint[])[i %% %(org_count)s + 1]",
                "external_id": "'q-' || i",
                "created_at": "t.created_at + i * interval '1 second'",
            },
            "FROM charts_chart AS t, generate_series(1, %(last)s) AS i WHERE t.id = %(first)s ORDER BY i",
            {"orgs": [org.pk for org in orgs], "org_count": len(orgs), "last": count - 1, "first": first.pk},
        )
        position = "substring(c.external_id FROM 3)::int"
        _copy_rows(
            ChartPlan,
            {
                "chart_id": "c.id",
                "position": position,
                "predicted_start": f"t.predicted_start + {position} * interval '10 seconds'",
                "eta": f"t.eta + {position} * interval '10 seconds'",
            },
            "FROM charts_chartplan AS t, charts_chart AS c"
            " WHERE t.chart_id = %(first)s AND c.id > %(first)s AND c.external_id LIKE 'q-%%'"
            " AND c.org_id = ANY(%(orgs)s::bigint[])",
            {"orgs": [org.pk for org in orgs], "first": first.pk},
        )
    return list(
        Chart.objects.filter(pk__gte=first.pk, org__in=orgs, external_id__startswith="q-").order_by("plan__position")
    )


def _copy_rows(model: type[Model], changed: dict[str, str], source: str, params: dict[str, Any]) -> None:
    """`INSERT INTO model's table SELECT ... source`: every column of the template row `t` as it is,
    but those in `changed`, computed by their SQL expression."""
    columns = [
        field.column for field in model._meta.concrete_fields if field.column in changed or not field.primary_key
    ]
    values = [changed.get(column, f"t.{column}") for column in columns]
    sql = f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) SELECT {', '.join(values)} {source}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
