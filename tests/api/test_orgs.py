"""Org endpoints: members read their own orgs' counts and clear-time; only staff steer."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import ChartState
from orgs.models import Org, OrgChange, WorkflowCost
from tests.conftest import Tenants
from tests.factories import ChartFactory

Client = Callable[[Any], APIClient]


def slugs(client: APIClient) -> list[str]:
    return [org["slug"] for org in client.get("/api/v1/orgs/").json()["results"]]


def test_list_shows_only_the_callers_orgs(tenants: Tenants, client_for: Client) -> None:
    assert slugs(client_for(tenants.member_a)) == ["acme"]
    assert slugs(client_for(tenants.member_b)) == ["beta"]
    assert slugs(client_for(tenants.outsider)) == []
    assert slugs(client_for(tenants.staff)) == ["acme", "beta"]


def test_retrieve_counts_and_clear_time(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.clear_at = timezone.now() + timedelta(hours=1)
    tenants.org_a.save()
    ChartFactory.create_batch(2, org=tenants.org_a, workflow=tenants.workflow)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING)
    ChartFactory.create_batch(5, org=tenants.org_b, workflow=tenants.workflow)

    body = client_for(tenants.member_a).get("/api/v1/orgs/acme/").json()

    assert body["counts"]["queued"] == 2
    assert body["counts"]["running"] == 1
    assert sum(body["counts"].values()) == 3
    assert body["clear_at"] is not None
    assert body["weight"] == 2


@pytest.mark.parametrize("who", ["member_b", "outsider"])
def test_another_org_is_404(tenants: Tenants, client_for: Client, who: str) -> None:
    client = client_for(getattr(tenants, who))

    assert client.get("/api/v1/orgs/acme/").status_code == 404
    assert client.get("/api/v1/orgs/acme/").json() == client.get("/api/v1/orgs/no-such/").json()


@pytest.mark.parametrize("who", ["member_a", "member_b", "outsider"])
def test_only_staff_steer(tenants: Tenants, client_for: Client, who: str) -> None:
    client = client_for(getattr(tenants, who))

    assert client.patch("/api/v1/orgs/acme/", {"weight": 9}, format="json").status_code == 403
    assert client.post("/api/v1/orgs/acme/hold/").status_code == 403
    assert client.post("/api/v1/orgs/acme/release/").status_code == 403
    assert client.get("/api/v1/orgs/acme/costs/").status_code == 403
    assert client.put("/api/v1/orgs/acme/costs/render/", {"cost": 3}, format="json").status_code == 403
    assert client.delete("/api/v1/orgs/acme/costs/render/").status_code == 403
    org = Org.objects.get(slug="acme")
    assert (org.weight, org.max_concurrency, org.queue_limit) == (2, None, None)
    assert not WorkflowCost.objects.exists()
    assert not OrgChange.objects.exists()


def test_staff_steer_an_org(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    patched = client.patch(
        "/api/v1/orgs/beta/", {"weight": 5, "max_concurrency": 2, "queue_limit": 100, "reason": "vip"}, format="json"
    )
    held = client.post("/api/v1/orgs/beta/hold/", {"reason": "invoice"}, format="json")
    released = client.post("/api/v1/orgs/beta/release/")

    assert patched.status_code == 200
    assert (patched.json()["weight"], patched.json()["max_concurrency"], patched.json()["queue_limit"]) == (5, 2, 100)
    assert held.json()["held"] is True
    assert released.json()["weight"] == 5
    assert set(OrgChange.objects.values_list("actor", flat=True)) == {"user:stella"}
    cleared = client.patch("/api/v1/orgs/beta/", {"max_concurrency": None}, format="json")
    assert cleared.json()["max_concurrency"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"weight": -1}, "weight"),
        ({"weight": "x"}, "weight"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"queue_limit": 0}, "queue_limit"),
        ({"weight": 10_001}, "weight"),
        ({"weight": "3"}, "weight"),
        ({"weight": True}, "weight"),
        ({"weight": 2.5}, "weight"),
        ({"weight": None}, "weight"),
        ({"queue_limit": []}, "queue_limit"),
        ({"reason": 5, "weight": 3}, "reason"),
        ([{"weight": 3}], "non_field_errors"),
    ],
)
def test_bad_org_changes_are_400(tenants: Tenants, client_for: Client, body: Any, field: str) -> None:
    response = client_for(tenants.staff).patch("/api/v1/orgs/acme/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert Org.objects.get(slug="acme").weight == 2


def test_a_refused_field_undoes_the_others(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.staff).patch("/api/v1/orgs/acme/", {"weight": 3, "queue_limit": 0}, format="json")

    assert response.status_code == 400
    assert Org.objects.get(slug="acme").weight == 2


def test_staff_costs(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    put = client.put("/api/v1/orgs/acme/costs/render/", {"cost": 3}, format="json")
    listed = client.get("/api/v1/orgs/acme/costs/").json()
    bad = client.put("/api/v1/orgs/acme/costs/render/", {"cost": 0}, format="json")
    unknown = client.put("/api/v1/orgs/acme/costs/nope/", {"cost": 3}, format="json")
    deleted = client.delete("/api/v1/orgs/acme/costs/render/")

    assert put.status_code == 200
    assert listed == [{"workflow": "render", "cost": 3, "etag": put["ETag"]}]
    assert bad.status_code == 400
    assert "cost" in bad.json()
    assert unknown.status_code == 404
    assert deleted.status_code == 204
    assert not WorkflowCost.objects.exists()
    assert client.put("/api/v1/orgs/no-such/costs/render/", {"cost": 3}, format="json").status_code == 404


def test_a_reason_is_measured_as_sent_not_after_trimming(tenants: Tenants, client_for: Client) -> None:
    """Found by Schemathesis's negative data: 500 characters and trailing whitespace passed the limit."""
    staff = client_for(tenants.staff)

    too_long = staff.post("/api/v1/orgs/acme/hold/", {"reason": "x" * 495 + "\x85" * 10}, format="json")
    at_limit = staff.post("/api/v1/orgs/acme/hold/", {"reason": "x" * 490 + " " * 10}, format="json")

    assert too_long.status_code == 400
    assert set(too_long.json()) == {"reason"}
    assert at_limit.status_code == 200


def test_the_schema_says_a_name_must_not_be_blank(tenants: Tenants, client_for: Client) -> None:
    """Found by Schemathesis's positive data: a name of whitespace is refused, and now the schema says so."""
    pattern = APIClient().get("/api/schema/?format=json").json()["components"]["schemas"]["OrgCreateRequest"]
    pattern = pattern["properties"]["name"]["pattern"]

    refused = client_for(tenants.staff).post("/api/v1/orgs/", {"name": "\x0c \u3000"}, format="json")

    assert refused.status_code == 400
    assert set(refused.json()) == {"name"}
    assert re.search(pattern, "\x0c \u3000") is None
    assert re.search(pattern, " Acme ") is not None
