"""Why a chart waits, in the API: the plan's reason, the chart's state and its org's hold."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework.fields import DateTimeField
from rest_framework.test import APIClient

from charts.models import ChartState
from common.actors import Actor
from orgs.services import org_hold
from tests.conftest import Tenants
from tests.factories import ChartFactory

Client = Callable[[Any], APIClient]


def reason_of(client: APIClient, chart_id: int) -> tuple[Any, Any, Any]:
    body = client.get(f"/api/v1/charts/{chart_id}/").json()
    return body["waiting_reason"], body["waiting_until"], body["available_at"]


def iso(moment: Any) -> str:
    return DateTimeField().to_representation(moment)  # type: ignore[no-any-return]


def test_a_planned_chart_shows_the_plans_reason_and_time(tenants: Tenants, client_for: Client) -> None:
    start = timezone.now() + timedelta(minutes=3)
    chart = ChartFactory(
        org=tenants.org_a, position=4, predicted_start=start, waiting_reason="turn", waiting_until=start
    )

    assert reason_of(client_for(tenants.member_a), chart.pk) == ("turn", iso(start), None)


def test_a_retry_shows_its_backoff_and_its_own_available_at(tenants: Tenants, client_for: Client) -> None:
    until = timezone.now() + timedelta(minutes=2)
    chart = ChartFactory(
        org=tenants.org_a, state=ChartState.RETRY_WAIT, attempt=1, available_at=until,
        position=0, waiting_reason="backoff", waiting_until=until,
    )  # fmt: skip

    assert reason_of(client_for(tenants.member_a), chart.pk) == ("backoff", iso(until), iso(until))


def test_a_chart_no_replan_has_seen_is_not_yet_planned(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)
    created = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "new"}, format="json").json()

    assert created["waiting_reason"] == "not_yet_planned"
    assert reason_of(client, created["id"]) == ("not_yet_planned", None, None)


def test_the_charts_state_and_its_orgs_hold_outrank_an_older_plan(tenants: Tenants, client_for: Client) -> None:
    paused = ChartFactory(org=tenants.org_a, state=ChartState.PAUSED, position=0, waiting_reason="budget")
    queued = ChartFactory(org=tenants.org_a, position=1, waiting_reason="turn")
    client = client_for(tenants.member_a)
    assert reason_of(client, paused.pk)[0] == "chart_paused"

    org_hold(org=tenants.org_a, actor=Actor("user:test", staff=True))

    assert reason_of(client, queued.pk) == ("org_held", None, None)
    listed = {row["id"]: row["waiting_reason"] for row in client.get("/api/v1/charts/").json()["results"]}
    assert listed == {paused.pk: "org_held", queued.pk: "org_held"}


def test_charts_in_flight_or_finished_have_no_reason(tenants: Tenants, client_for: Client) -> None:
    running = ChartFactory(org=tenants.org_a, state=ChartState.RUNNING, waiting_reason="budget")
    done = ChartFactory(org=tenants.org_a, state=ChartState.SUCCEEDED)
    client = client_for(tenants.member_a)

    assert reason_of(client, running.pk) == (None, None, None)
    assert reason_of(client, done.pk) == (None, None, None)
