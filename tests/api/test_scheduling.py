"""Staff endpoints on the scheduler: configuration, provider pauses, plan preview."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from knobs.models import ConfigChange, SchedulerConfig
from orgs.models import ProviderPause
from tests.conftest import Tenants
from tests.factories import ProviderFactory

Client = Callable[[Any], APIClient]
STAFF_ROUTES = [
    ("get", "/api/v1/scheduler/config/", None),
    ("patch", "/api/v1/scheduler/config/", {"budget": 3}),
    ("get", "/api/v1/provider-pauses/", None),
    ("post", "/api/v1/provider-pauses/", {"provider": "llm", "until": "2099-01-01T00:00:00Z"}),
    ("post", "/api/v1/provider-pauses/1/end/", None),
    ("post", "/api/v1/scheduler/plan-preview/", {"budget": 3}),
]


@pytest.mark.parametrize("who", ["member_a", "member_b", "outsider"])
@pytest.mark.parametrize(("method", "url", "body"), STAFF_ROUTES)
def test_only_staff(tenants: Tenants, client_for: Client, who: str, method: str, url: str, body: Any) -> None:
    ProviderFactory(slug="llm")

    response = getattr(client_for(getattr(tenants, who)), method)(url, body, format="json")

    assert response.status_code == 403
    assert not ConfigChange.objects.exists()
    assert not ProviderPause.objects.exists()


def test_config_read_and_change(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    read = client.get("/api/v1/scheduler/config/").json()
    changed = client.patch("/api/v1/scheduler/config/", {"budget": 25, "policy": "deficit"}, format="json")

    assert read["budget"] == 10
    assert changed.status_code == 200
    assert (changed.json()["budget"], changed.json()["policy"]) == (25, "deficit")
    assert set(ConfigChange.objects.values_list("actor", flat=True)) == {"user:stella"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"budget": 0}, "budget"),
        ({"policy": "lottery"}, "policy"),
        ({"quantum": 0}, "quantum"),
        ({"backoff_base": 100, "backoff_ceiling": 10}, "backoff_ceiling"),
        ({"retry_budget_share": 2}, "retry_budget_share"),
    ],
)
def test_bad_config_is_400_and_writes_nothing(
    tenants: Tenants, client_for: Client, body: dict[str, Any], field: str
) -> None:
    response = client_for(tenants.staff).patch("/api/v1/scheduler/config/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert SchedulerConfig.load().budget == 10
    assert not ConfigChange.objects.exists()


def test_provider_pauses(tenants: Tenants, client_for: Client) -> None:
    ProviderFactory(slug="llm")
    client = client_for(tenants.staff)
    until = (timezone.now() + timedelta(minutes=5)).isoformat()

    created = client.post(
        "/api/v1/provider-pauses/", {"provider": "llm", "org": "beta", "until": until, "reason": "429s"}, format="json"
    )
    listed = client.get("/api/v1/provider-pauses/").json()["results"]
    ended = client.post(f"/api/v1/provider-pauses/{created.json()['id']}/end/")

    assert created.status_code == 201
    assert (created.json()["org"], created.json()["provider"]) == ("beta", "llm")
    assert [p["id"] for p in listed] == [created.json()["id"]]
    assert ended.json() == {"ended": 1}
    assert client.get("/api/v1/provider-pauses/").json()["results"] == []
    assert len(client.get("/api/v1/provider-pauses/?active=false").json()["results"]) == 1
    assert client.post("/api/v1/provider-pauses/999/end/").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"provider": "nope", "until": "2099-01-01T00:00:00Z"}, "provider"),
        ({"provider": "llm", "org": "nope", "until": "2099-01-01T00:00:00Z"}, "org"),
        ({"provider": "llm", "until": "2001-01-01T00:00:00Z"}, "until"),
        ({"provider": "llm", "until": "soon"}, "until"),
    ],
)
def test_bad_pauses_are_400(tenants: Tenants, client_for: Client, body: dict[str, Any], field: str) -> None:
    ProviderFactory(slug="llm")

    response = client_for(tenants.staff).post("/api/v1/provider-pauses/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not ProviderPause.objects.exists()


def test_plan_preview(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    response = client.post(
        "/api/v1/scheduler/plan-preview/",
        {
            "weights": {"acme": 5},
            "budget": 20,
            "costs": [{"org": "beta", "workflow": "render", "cost": 2}],
            "hold": ["beta"],
            "release": [],
        },
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert set(response.json()) >= {"orgs", "global"}
    assert set(response.json()["global"]) == {"before", "after"}
    assert SchedulerConfig.load().budget == 10  # a preview writes nothing


def test_plan_preview_refuses_unknown_names(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    unknown_org = client.post("/api/v1/scheduler/plan-preview/", {"hold": ["nope"]}, format="json")
    unknown_workflow = client.post(
        "/api/v1/scheduler/plan-preview/", {"costs": [{"org": "acme", "workflow": "nope", "cost": 2}]}, format="json"
    )
    bad_weight = client.post("/api/v1/scheduler/plan-preview/", {"weights": {"acme": -1}}, format="json")

    assert unknown_org.status_code == 400
    assert "org" in unknown_org.json()
    assert unknown_workflow.status_code == 400
    assert "workflow" in unknown_workflow.json()
    assert bad_weight.status_code == 400
    assert "weights" in bad_weight.json()


def test_provider_pauses_query_is_strict(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    unknown = client.get("/api/v1/provider-pauses/?colour=red")
    bad = client.get("/api/v1/provider-pauses/?active=maybe")
    repeated = client.get("/api/v1/provider-pauses/?active=true&active=false")

    assert (unknown.status_code, unknown.json()) == (400, {"colour": ["unknown query parameter"]})
    assert (bad.status_code, list(bad.json())) == (400, ["active"])
    assert (repeated.status_code, list(repeated.json())) == (400, ["active"])
    assert client.get("/api/v1/provider-pauses/?active=false&page_size=5").status_code == 200
