"""A chart's due time at submission through the API: its own `due_at`, else submitted + its org's
promise for the workflow, else none; a past one is refused naming the field (by index in a bulk, all or
nothing); one sooner than the workflow's expected duration is accepted with a warning; a repeat keeps
the first due time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, DurationStat
from orgs.models import Org, Workflow, WorkflowTurnaround
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db

Client = Callable[[Any], APIClient]


def later(**delta: float) -> datetime:
    return timezone.now() + timedelta(**delta)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def parsed(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def member(tenants: Tenants, client_for: Client) -> APIClient:
    return client_for(tenants.member_a)


def test_a_chart_carries_its_own_due_time(tenants: Tenants, member: APIClient) -> None:
    due = later(days=2).replace(microsecond=0)

    response = member.post(
        "/api/v1/charts/", {"workflow": "render", "external_id": "d", "due_at": iso(due)}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert parsed(response.json()["due_at"]) == due
    assert response.json()["warnings"] == []
    chart = Chart.objects.get(external_id="d")
    assert chart.due_at == due
    assert parsed(member.get(f"/api/v1/charts/{chart.pk}/").json()["due_at"]) == due
    assert parsed(member.get("/api/v1/charts/").json()["results"][0]["due_at"]) == due


def test_a_due_time_in_another_zone_is_the_same_moment(tenants: Tenants, member: APIClient) -> None:
    response = member.post(
        "/api/v1/charts/",
        {"workflow": "render", "external_id": "z", "due_at": "2099-01-01T14:00:00+02:00"},
        format="json",
    )

    assert response.status_code == 201
    assert Chart.objects.get().due_at == datetime.fromisoformat("2099-01-01T12:00:00+00:00")


def test_without_one_a_chart_is_due_at_submission_plus_its_target(tenants: Tenants, member: APIClient) -> None:
    other = Workflow.objects.create(name="ocr", workflow_type="Ocr", task_queue="q")
    Org.objects.filter(pk=tenants.org_a.pk).update(turnaround=86400)
    WorkflowTurnaround.objects.create(org=tenants.org_a, workflow=other, turnaround=600)

    plain = member.post("/api/v1/charts/", {"workflow": "render", "external_id": "p"}, format="json").json()
    rushed = member.post("/api/v1/charts/", {"workflow": "ocr", "external_id": "r"}, format="json").json()
    elsewhere = APIClient()
    elsewhere.force_login(tenants.member_b)
    none = elsewhere.post("/api/v1/charts/", {"workflow": "render", "external_id": "n"}, format="json").json()

    charts = {chart.external_id: chart for chart in Chart.objects.all()}
    assert charts["p"].due_at == charts["p"].created_at + timedelta(seconds=86400)
    assert charts["r"].due_at == charts["r"].created_at + timedelta(seconds=600)
    assert charts["n"].due_at is None
    assert parsed(plain["due_at"]) == charts["p"].due_at
    assert parsed(rushed["due_at"]) == charts["r"].due_at
    assert none["due_at"] is None


@pytest.mark.parametrize(
    ("due_at", "words"),
    [
        ("2001-01-01T00:00:00Z", "in the past"),
        ("2099-01-01T00:00:00", "time zone"),
        ("tomorrow", "ISO 8601"),
        ("2099-13-01T00:00:00Z", "ISO 8601"),
        (12, "ISO 8601"),
        (True, "ISO 8601"),
    ],
)
def test_a_past_or_unreadable_due_time_is_a_400_naming_due_at(
    tenants: Tenants, member: APIClient, due_at: Any, words: str
) -> None:
    response = member.post(
        "/api/v1/charts/", {"workflow": "render", "external_id": "x", "due_at": due_at, "priority": 99}, format="json"
    )

    assert response.status_code == 400
    assert words in response.json()["due_at"][0]
    assert "priority" in response.json()  # every problem in one answer
    assert not Chart.objects.exists()


def test_a_due_time_sooner_than_the_expected_duration_is_accepted_with_a_warning(
    tenants: Tenants, member: APIClient
) -> None:
    Workflow.objects.filter(pk=tenants.workflow.pk).update(initial_duration=3600)
    soon = {"workflow": "render", "external_id": "soon", "due_at": iso(later(minutes=10))}

    response = member.post("/api/v1/charts/", soon, format="json")

    assert response.status_code == 201
    (warning,) = response.json()["warnings"]
    assert warning["field"] == "due_at"
    assert "3600 s" in warning["message"]
    # The learned mean of the org's runs, once there is one, is what a due time is judged against.
    DurationStat.objects.create(org=tenants.org_a, workflow=tenants.workflow, count=2, total_seconds=240)
    learned = member.post(
        "/api/v1/charts/", {**soon, "external_id": "ok", "due_at": iso(later(minutes=10))}, format="json"
    )
    assert learned.json()["warnings"] == []


def test_a_repeat_keeps_its_first_due_time_and_says_so(tenants: Tenants, member: APIClient) -> None:
    first = later(days=1).replace(microsecond=0)
    body = {"workflow": "render", "external_id": "twice", "due_at": iso(first)}
    member.post("/api/v1/charts/", body, format="json")

    again = member.post("/api/v1/charts/", {**body, "due_at": iso(later(days=3))}, format="json")
    same = member.post("/api/v1/charts/", body, format="json")

    assert again.status_code == 200
    assert parsed(again.json()["due_at"]) == first == Chart.objects.get().due_at
    assert "submitted before" in again.json()["warnings"][0]["message"]
    assert same.json()["warnings"] == []


def test_bulk_sets_each_items_due_time(tenants: Tenants, member: APIClient) -> None:
    Org.objects.filter(pk=tenants.org_a.pk).update(turnaround=3600)
    Workflow.objects.filter(pk=tenants.workflow.pk).update(initial_duration=7200)
    own = later(days=1).replace(microsecond=0)
    items = [
        {"workflow": "render", "external_id": "b-0", "due_at": iso(own)},
        {"workflow": "render", "external_id": "b-1"},
        {"workflow": "render", "external_id": "b-2", "due_at": iso(later(minutes=5))},
    ]

    response = member.post("/api/v1/charts/bulk/", {"items": items}, format="json")

    assert response.status_code == 201, response.json()
    charts = {chart.external_id: chart for chart in Chart.objects.all()}
    assert charts["b-0"].due_at == own
    assert charts["b-1"].due_at == charts["b-1"].created_at + timedelta(hours=1)
    answered = response.json()["charts"]
    assert [parsed(item["due_at"]) for item in answered] == [charts[f"b-{i}"].due_at for i in range(3)]
    assert [len(item["warnings"]) for item in answered] == [0, 0, 1]
    assert answered[2]["warnings"][0]["field"] == "due_at"


def test_bulk_refuses_past_due_times_by_index_all_or_nothing(tenants: Tenants, member: APIClient) -> None:
    items = [
        {"workflow": "render", "external_id": "ok", "due_at": iso(later(days=1))},
        {"workflow": "render", "external_id": "past", "due_at": "2001-01-01T00:00:00Z"},
        {"workflow": "render", "external_id": "naive", "due_at": "2099-01-01T00:00:00"},
        {"workflow": "nope", "external_id": "both", "due_at": "2001-01-01T00:00:00Z"},
    ]

    response = member.post("/api/v1/charts/bulk/", {"items": items}, format="json")

    assert response.status_code == 400
    errors = response.json()["items"]
    assert set(errors) == {"1", "2", "3"}
    assert "due_at" in errors["1"]
    assert "due_at" in errors["2"]
    assert set(errors["3"]) == {"workflow", "due_at"}
    assert not Chart.objects.exists()


def test_a_bulk_of_many_charts_stages_their_due_times(tenants: Tenants, member: APIClient) -> None:
    """More than a hundred rows are COPYed into a temporary table: the due times go through it too."""
    Org.objects.filter(pk=tenants.org_a.pk).update(turnaround=60)
    own = later(days=1).replace(microsecond=0)
    items = [{"workflow": "render", "external_id": f"m-{i}"} for i in range(150)]
    items[7]["due_at"] = iso(own)

    response = member.post("/api/v1/charts/bulk/", {"items": items}, format="json")

    assert response.status_code == 201
    charts = {chart.external_id: chart for chart in Chart.objects.all()}
    assert charts["m-7"].due_at == own
    assert all(c.due_at == c.created_at + timedelta(seconds=60) for k, c in charts.items() if k != "m-7")


def test_the_status_read_of_a_token_carries_the_due_time(
    tenants: Tenants, token_client: Callable[[str], APIClient], org_token: str
) -> None:
    """The token's chart read has its own path (`charts.status_api`): it answers `due_at` too."""
    due = later(days=1).replace(microsecond=0)
    client = token_client(org_token)
    chart = client.post(
        "/api/v1/charts/", {"workflow": "render", "external_id": "s", "due_at": iso(due)}, format="json"
    ).json()

    read = client.get(f"/api/v1/charts/{chart['id']}/", HTTP_ACCEPT="application/json")

    assert read.status_code == 200
    assert parsed(read.json()["due_at"]) == due
