"""A chart's history in the API: when, from, to, why and who, scoped to the caller's orgs; a tenant
never learns an operator's username nor the lines of an error after the first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from charts.models import Chart, ChartEvent, ChartState
from charts.services import chart_pause, chart_resume
from common.actors import Actor
from tests.conftest import Tenants
from tests.factories import MembershipFactory, UserFactory

Client = Callable[[Any], APIClient]
TRACEBACK = 'attempt 1 failed, retry in 5 s: ValueError: bad input\n  File "/srv/app/secret.py", line 3'


@pytest.fixture
def history(tenants: Tenants, chart_a: Chart) -> Chart:
    """acme's chart paused by an operator, resumed by alice, then failed once with a long error."""
    chart_pause(chart=chart_a, actor=Actor("user:stella", staff=True), reason="maintenance window")
    chart_resume(chart=chart_a, actor=Actor("user:alice", staff=True), reason="go ahead")
    ChartEvent.objects.create(
        chart=chart_a,
        from_state="running",
        to_state="retry_wait",
        actor="system:reconciler",
        reason=TRACEBACK,
    )
    return chart_a


def rows(body: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(e["from_state"], e["to_state"], e["actor"], e["reason"]) for e in body["results"]]


def test_a_member_reads_the_history_with_colleagues_named_and_staff_not(
    tenants: Tenants, client_for: Client, history: Chart
) -> None:
    response = client_for(tenants.member_a).get(f"/api/v1/charts/{history.pk}/events/")

    assert response.status_code == 200
    assert rows(response.json()) == [
        ("queued", "paused", "staff", ""),  # an operator's reason is internal
        ("paused", "queued", "user:alice", "go ahead"),
        ("running", "retry_wait", "system:reconciler", "attempt 1 failed, retry in 5 s: ValueError: bad input"),
    ]
    assert "stella" not in response.content.decode()
    assert "secret.py" not in response.content.decode()
    assert all(event["at"] for event in response.json()["results"])


def test_staff_read_every_actor_and_the_whole_reason(tenants: Tenants, client_for: Client, history: Chart) -> None:
    body = client_for(tenants.staff).get(f"/api/v1/charts/{history.pk}/events/").json()

    assert [actor for _, _, actor, _ in rows(body)] == ["user:stella", "user:alice", "system:reconciler"]
    assert rows(body)[-1][3] == TRACEBACK


def test_a_user_who_left_the_org_or_belongs_elsewhere_is_staff_to_the_tenant(
    tenants: Tenants, client_for: Client, chart_a: Chart
) -> None:
    chart_pause(chart=chart_a, actor=Actor("user:bob", staff=True), reason="")  # bob is in beta, not acme
    chart_resume(chart=chart_a, actor=Actor("bench", staff=True), reason="")

    body = client_for(tenants.member_a).get(f"/api/v1/charts/{chart_a.pk}/events/").json()

    assert [actor for _, _, actor, _ in rows(body)] == ["staff", "staff"]


@pytest.mark.parametrize("who", ["member_b", "outsider"])
def test_another_orgs_chart_history_is_404(tenants: Tenants, client_for: Client, history: Chart, who: str) -> None:
    response = client_for(getattr(tenants, who)).get(f"/api/v1/charts/{history.pk}/events/")

    assert response.status_code == 404
    assert client_for(tenants.member_a).get("/api/v1/charts/999999/events/").status_code == 404


def test_an_org_token_reads_its_orgs_history_only(
    token_client: Callable[[str], APIClient], org_token: str, history: Chart, chart_b: Chart
) -> None:
    client = token_client(org_token)

    assert len(client.get(f"/api/v1/charts/{history.pk}/events/").json()["results"]) == 3
    assert client.get(f"/api/v1/charts/{chart_b.pk}/events/").status_code == 404


def test_anonymous_callers_are_refused(client_for: Client, history: Chart) -> None:
    assert client_for(None).get(f"/api/v1/charts/{history.pk}/events/").status_code in (401, 403)


def test_the_history_pages_oldest_first_in_a_fixed_number_of_queries(
    tenants: Tenants, client_for: Client, chart_a: Chart, django_assert_num_queries: Any
) -> None:
    colleagues = [UserFactory(username=f"colleague{i}") for i in range(5)]
    for user in colleagues:
        MembershipFactory(user=user, org=tenants.org_a)
    ChartEvent.objects.bulk_create(
        ChartEvent(
            chart=chart_a,
            from_state="queued",
            to_state="paused",
            actor=Actor(f"user:colleague{i % 5}", staff=True),
            reason=str(i),
        )
        for i in range(30)
    )
    client = client_for(tenants.member_a)

    # session, user, scope, chart, events page, the page's colleagues
    with django_assert_num_queries(6):
        first = client.get(f"/api/v1/charts/{chart_a.pk}/events/?page_size=20").json()
    with django_assert_num_queries(6):
        second = client.get(first["next"]).json()

    reasons = [e["reason"] for e in first["results"] + second["results"]]
    assert reasons == [str(i) for i in range(30)]
    assert {e["actor"] for e in first["results"]} == {f"user:colleague{i}" for i in range(5)}
    assert second["next"] is None


def test_a_chart_submitted_through_the_api_has_its_submission_in_its_history(
    tenants: Tenants, client_for: Client
) -> None:
    client = client_for(tenants.member_a)
    created = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "x-1"}, format="json").json()

    body = client.get(f"/api/v1/charts/{created['id']}/events/").json()

    assert rows(body) == [("", ChartState.QUEUED, "user:alice", "submitted")]


def test_the_schema_shows_the_history_paged(tenants: Tenants, client_for: Client) -> None:
    schema = client_for(tenants.member_a).get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/charts/{id}/events/"]["get"]
    listed = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    page = schema["components"]["schemas"][listed]
    assert {"next", "previous", "results"} <= set(page["properties"])
    event = page["properties"]["results"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][event]["properties"]) == {
        "at",
        "from_state",
        "to_state",
        "reason",
        "actor",
    }
    assert {"cursor", "page_size"} <= {p["name"] for p in operation["parameters"]}
