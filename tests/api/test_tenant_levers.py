"""The high tier is an operators' lever: tenants (org tokens, members' sessions) cannot put their charts
in it, and their own `priority` only reorders their charts inside their share, in a narrow range.
Staff keep every lever. Also: a held org's 429, and what a lever's response says about the plan."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client as DjangoClient
from rest_framework.test import APIClient

from charts.models import Chart
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.services import org_hold
from scheduling.replan import plan_refresh
from tests.conftest import Tenants
from tests.factories import ChartFactory

Client = Callable[[Any], APIClient]
pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant_clients(tenants: Tenants, client_for: Client, token_client: Callable[[str], APIClient], org_token: str):
    """alice's session and her acme token: the two ways a tenant calls the API."""
    return {"session": client_for(tenants.member_a), "token": token_client(org_token)}


@pytest.mark.parametrize("how", ["session", "token"])
def test_a_tenant_cannot_submit_into_the_high_tier(tenants: Tenants, tenant_clients: dict, how: str) -> None:
    client = tenant_clients[how]
    body = {"workflow": "render", "external_id": "x", "high_priority": True}

    single = client.post("/api/v1/charts/", body, format="json")
    bulk = client.post(
        "/api/v1/charts/bulk/", {"items": [{"workflow": "render", "external_id": "y"}, body]}, format="json"
    )

    assert single.status_code == 403
    assert "staff" in single.json()["high_priority"][0]
    assert bulk.status_code == 403
    assert "high_priority" in bulk.json()["items"]["1"]
    assert not Chart.objects.exists()


@pytest.mark.parametrize("how", ["session", "token"])
def test_a_tenant_cannot_prioritize_into_the_high_tier(tenants: Tenants, tenant_clients: dict, how: str) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)

    response = tenant_clients[how].post(
        f"/api/v1/charts/{chart.pk}/prioritize/", {"high_priority": True}, format="json"
    )

    assert response.status_code == 403
    assert "high_priority" in response.json()
    chart.refresh_from_db()
    assert not chart.high_priority
    # Taking a chart out of the tier is no jump: allowed (an operator put it there).
    cleared = tenant_clients[how].post(
        f"/api/v1/charts/{chart.pk}/prioritize/", {"high_priority": False}, format="json"
    )
    assert cleared.status_code == 200


def test_a_tenants_priority_is_capped_to_its_range(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    url = f"/api/v1/charts/{chart.pk}/prioritize/"

    assert client.post(url, {"priority": 10}, format="json").json()["priority"] == 10
    assert client.post(url, {"priority": -10}, format="json").json()["priority"] == -10
    beyond = client.post(url, {"priority": 11}, format="json")
    assert beyond.status_code == 403
    assert "-10 to 10" in beyond.json()["priority"][0]
    submitted = client.post(
        "/api/v1/charts/", {"workflow": "render", "external_id": "p", "priority": -11}, format="json"
    )
    assert submitted.status_code == 403
    assert "priority" in submitted.json()
    # A value nobody may set is bad input for everyone: 400, not 403.
    assert client.post(url, {"priority": 5000}, format="json").status_code == 400
    # Move to top stops at the top of the tenant range, whatever the aging bonus.
    scheduler_config_set(actor=Actor("user:test", staff=True), aging_step=60, aging_cap=50)
    other = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, priority=3)
    assert client.post(f"/api/v1/charts/{other.pk}/move-to-top/").json()["priority"] == 10


def test_staff_keep_every_lever(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)
    body = {"org": "acme", "workflow": "render", "external_id": "s", "high_priority": True, "priority": 500}

    submitted = client.post("/api/v1/charts/", body, format="json")
    chart = Chart.objects.get(external_id="s")
    prioritized = client.post(f"/api/v1/charts/{chart.pk}/prioritize/", {"priority": -900}, format="json")
    bulk = client.post(
        "/api/v1/charts/bulk/",
        {"org": "beta", "items": [{"workflow": "render", "external_id": "t", "high_priority": True}]},
        format="json",
    )

    assert submitted.status_code == 201
    assert (submitted.json()["high_priority"], submitted.json()["priority"]) == (True, 500)
    assert prioritized.json()["priority"] == -900
    assert bulk.status_code == 201


def test_the_other_staff_paths_refuse_tenants(tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    member = DjangoClient()
    member.force_login(tenants.member_a)

    dashboard = member.get("/dashboard/partials/?names=orgs")  # the dashboard's levers are this API's
    admin = member.post("/admin/charts/chart/", {"action": "make_high_priority", "_selected_action": [chart.pk]})

    assert dashboard.status_code == 403
    assert admin.status_code == 302  # to the admin's login: members are not staff
    chart.refresh_from_db()
    assert not chart.high_priority


def test_a_tenants_priority_does_not_change_its_charts_per_round(tenants: Tenants, client_for: Client) -> None:
    """acme (weight 2) raises every chart to the top of its range; beta (weight 1) does not. Each round
    still takes 2 of acme's and 1 of beta's: priority only reorders acme's own charts (and a round's)."""
    client = client_for(tenants.member_a)
    scheduler_config_set(actor=Actor("user:test", staff=True), budget=1)
    acme = [ChartFactory(org=tenants.org_a, workflow=tenants.workflow) for _ in range(6)]
    for _ in range(3):
        ChartFactory(org=tenants.org_b, workflow=tenants.workflow)
    plan_refresh()
    before = list(Chart.objects.order_by("position").values_list("org__slug", flat=True))
    for chart in acme[3:]:
        response = client.post(f"/api/v1/charts/{chart.pk}/prioritize/", {"priority": 10}, format="json")
        assert response.status_code == 200

    plan_refresh()
    ordered = list(Chart.objects.order_by("position").values_list("pk", "org__slug"))

    after = [slug for _, slug in ordered]
    for start in range(0, 9, 3):
        assert Counter(before[start : start + 3]) == Counter(after[start : start + 3]) == {"acme": 2, "beta": 1}
    # ... while acme's own raised charts now come first among acme's.
    assert [pk for pk, slug in ordered if slug == "acme"][:3] == [chart.pk for chart in acme[3:]]


def test_a_held_orgs_429_says_it_is_held_and_gives_no_retry_after(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.queue_limit = 1
    tenants.org_a.save()
    client = client_for(tenants.member_a)
    client.post("/api/v1/charts/", {"workflow": "render", "external_id": "1"}, format="json")
    org_hold(org=tenants.org_a, actor=Actor("user:test", staff=True))

    refused = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "2"}, format="json")

    assert refused.status_code == 429
    assert "Retry-After" not in refused
    assert refused.json()["held"] is True
    assert "held" in refused.json()["org"][0]
    assert Chart.objects.count() == 1


def test_an_unheld_orgs_429_says_it_is_not_held(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.queue_limit = 1
    tenants.org_a.save()
    client = client_for(tenants.member_a)
    client.post("/api/v1/charts/", {"workflow": "render", "external_id": "1"}, format="json")

    refused = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "2"}, format="json")

    assert int(refused["Retry-After"]) >= 1
    assert refused.json()["held"] is False


def test_a_levers_response_says_a_replan_is_under_way(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)
    first = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "1"}, format="json").json()
    second = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "2"}, format="json").json()
    repeat = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "2"}, format="json").json()
    assert (first["replanning"], first["position"]) == (True, None)
    assert repeat["replanning"] is False  # nothing changed
    plan_refresh()

    moved = client.post(f"/api/v1/charts/{second['id']}/move-to-top/").json()
    assert (moved["replanning"], moved["position"]) == (True, 1)  # the plan before the lever, said so
    plan_refresh()
    assert client.get(f"/api/v1/charts/{second['id']}/").json()["position"] == 0
