"""Workflow endpoints: anyone signed in reads the catalogue; only staff set a workflow's run timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from orgs.models import Workflow
from orgs.services import MAX_RUN_TIMEOUT
from tests.conftest import Tenants
from tests.factories import ProviderFactory, WorkflowFactory

Client = Callable[[Any], APIClient]


def test_members_and_staff_read_workflows_with_their_run_timeout(
    tenants: Tenants, client_for: Client, settings: Any
) -> None:
    settings.FAIRSCHED_RUN_TIMEOUT = 7200
    WorkflowFactory(name="export", default_cost=3, run_timeout=600, provider=ProviderFactory(slug="geo-api"))

    for user in (tenants.member_a, tenants.staff):
        body = client_for(user).get("/api/v1/workflows/").json()
        assert body["results"] == [
            {
                "name": "export",
                "default_cost": 3,
                "provider": "geo-api",
                "run_timeout": 600,
                "effective_run_timeout": 600,
            },
            {"name": "render", "default_cost": 1, "provider": None, "run_timeout": None, "effective_run_timeout": 7200},
        ]
    one = client_for(tenants.member_b).get("/api/v1/workflows/export/")
    assert one.status_code == 200
    assert one.json()["run_timeout"] == 600
    assert client_for(tenants.member_a).get("/api/v1/workflows/nope/").status_code == 404
    assert client_for(None).get("/api/v1/workflows/").status_code in (401, 403)


def test_staff_set_and_clear_a_run_timeout(tenants: Tenants, client_for: Client, settings: Any) -> None:
    settings.FAIRSCHED_RUN_TIMEOUT = 7200
    staff = client_for(tenants.staff)

    response = staff.patch("/api/v1/workflows/render/", {"run_timeout": 900}, format="json")
    assert response.status_code == 200
    assert (response.json()["run_timeout"], response.json()["effective_run_timeout"]) == (900, 900)
    assert Workflow.objects.get(name="render").run_timeout == 900

    response = staff.patch("/api/v1/workflows/render/", {"run_timeout": None}, format="json")
    assert (response.json()["run_timeout"], response.json()["effective_run_timeout"]) == (None, 7200)
    assert Workflow.objects.get(name="render").run_timeout is None


@pytest.mark.parametrize("who", ["member_a", "outsider"])
def test_only_staff_set_run_timeouts(tenants: Tenants, client_for: Client, who: str) -> None:
    response = client_for(getattr(tenants, who)).patch("/api/v1/workflows/render/", {"run_timeout": 5}, format="json")
    assert response.status_code == 403
    assert Workflow.objects.get(name="render").run_timeout is None


@pytest.mark.parametrize("value", [0, -5, 1.5, "soon", True, MAX_RUN_TIMEOUT + 1])
def test_a_bad_run_timeout_is_400_naming_the_field(tenants: Tenants, client_for: Client, value: Any) -> None:
    response = client_for(tenants.staff).patch("/api/v1/workflows/render/", {"run_timeout": value}, format="json")
    assert response.status_code == 400
    assert "run_timeout" in response.json()
    assert Workflow.objects.get(name="render").run_timeout is None


def test_a_missing_run_timeout_is_400(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.staff).patch("/api/v1/workflows/render/", {}, format="json")
    assert response.status_code == 400
    assert "run_timeout" in response.json()
