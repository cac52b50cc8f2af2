"""Edits without lost updates: GET answers an ETag, PATCH with a stale If-Match is a 412 that writes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from knobs.models import ConfigChange, SchedulerConfig
from orgs.models import Org, OrgChange, Workflow, WorkflowCost
from tests.conftest import Tenants
from tests.factories import ChartFactory

pytestmark = pytest.mark.django_db

Client = Callable[[Any], APIClient]
STRONG = re.compile(r'^"[0-9a-f]{32}"$')
# Each resource, with a change an operator makes meanwhile and the one the stale editor then sends.
RESOURCES = [
    ("/api/v1/orgs/acme/", {"weight": 5}, {"queue_limit": 50}),
    ("/api/v1/workflows/render/", {"default_cost": 5}, {"run_timeout": 900}),
    ("/api/v1/scheduler/config/", {"budget": 7}, {"max_attempts": 4}),
]


def stored() -> tuple[Any, ...]:
    org, workflow, config = Org.objects.get(slug="acme"), Workflow.objects.get(name="render"), SchedulerConfig.load()
    return (
        org.weight,
        org.queue_limit,
        workflow.default_cost,
        workflow.run_timeout,
        config.budget,
        config.max_attempts,
    )


@pytest.mark.parametrize(("url", "meanwhile", "edit"), RESOURCES)
def test_get_answers_a_strong_etag_that_a_patch_moves(
    tenants: Tenants, client_for: Client, url: str, meanwhile: dict[str, Any], edit: dict[str, Any]
) -> None:
    staff = client_for(tenants.staff)
    opened = staff.get(url)["ETag"]
    assert STRONG.match(opened)
    assert staff.get(url)["ETag"] == opened

    patched = staff.patch(url, edit, format="json", HTTP_IF_MATCH=opened)

    assert patched.status_code == 200
    assert patched["ETag"] not in (None, opened)
    assert patched["ETag"] == staff.get(url)["ETag"]


@pytest.mark.parametrize(("url", "meanwhile", "edit"), RESOURCES)
def test_a_stale_if_match_is_412_and_writes_nothing(
    tenants: Tenants, client_for: Client, url: str, meanwhile: dict[str, Any], edit: dict[str, Any]
) -> None:
    staff = client_for(tenants.staff)
    opened = staff.get(url)["ETag"]
    assert staff.patch(url, meanwhile, format="json").status_code == 200  # no If-Match: as before
    before = stored()
    changes = (OrgChange.objects.count(), ConfigChange.objects.count())

    refused = staff.patch(url, edit, format="json", HTTP_IF_MATCH=opened)

    assert refused.status_code == 412
    assert "changed since" in refused.json()["detail"][0]
    assert stored() == before
    assert (OrgChange.objects.count(), ConfigChange.objects.count()) == changes
    current = staff.get(url)["ETag"]
    assert staff.patch(url, edit, format="json", HTTP_IF_MATCH=current).status_code == 200


@pytest.mark.parametrize("if_match", ["*", 'W/"0", {current}', '"0", {current}'])
def test_if_match_takes_any_a_list_or_star(tenants: Tenants, client_for: Client, if_match: str) -> None:
    staff = client_for(tenants.staff)
    current = staff.get("/api/v1/orgs/acme/")["ETag"]
    header = if_match.format(current=current)
    assert (
        staff.patch("/api/v1/orgs/acme/", {"queue_limit": 50}, format="json", HTTP_IF_MATCH=header).status_code == 200
    )


@pytest.mark.parametrize("if_match", ['W/"{tag}"', '"0"', "garbage"])
def test_a_weak_or_foreign_if_match_is_412(tenants: Tenants, client_for: Client, if_match: str) -> None:
    staff = client_for(tenants.staff)
    tag = staff.get("/api/v1/orgs/acme/")["ETag"].strip('"')
    response = staff.patch(
        "/api/v1/orgs/acme/", {"queue_limit": 50}, format="json", HTTP_IF_MATCH=if_match.format(tag=tag)
    )
    assert response.status_code == 412
    assert Org.objects.get(slug="acme").queue_limit is None


def test_a_hold_meanwhile_refuses_a_stale_weight_edit(tenants: Tenants, client_for: Client) -> None:
    staff = client_for(tenants.staff)
    opened = staff.get("/api/v1/orgs/acme/")["ETag"]
    assert staff.post("/api/v1/orgs/acme/hold/", {}, format="json").status_code == 200

    refused = staff.patch("/api/v1/orgs/acme/", {"weight": 1}, format="json", HTTP_IF_MATCH=opened)

    assert refused.status_code == 412
    assert Org.objects.get(slug="acme").weight == 0
    assert list(OrgChange.objects.values_list("field", flat=True)) == ["hold"]


def test_the_org_s_etag_is_its_row_not_its_chart_counts(tenants: Tenants, client_for: Client) -> None:
    staff = client_for(tenants.staff)
    opened = staff.get("/api/v1/orgs/acme/")["ETag"]
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    assert staff.get("/api/v1/orgs/acme/")["ETag"] == opened


def test_a_cost_answers_an_etag_and_a_stale_if_match_is_412(tenants: Tenants, client_for: Client) -> None:
    staff, url = client_for(tenants.staff), "/api/v1/orgs/acme/costs/render/"
    read = staff.get(url)
    assert (read.status_code, read.json()) == (200, {"workflow": "render", "cost": None})
    opened = read["ETag"]
    assert STRONG.match(opened)
    assert staff.put(url, {"cost": 4}, format="json").status_code == 200  # no If-Match: as before

    for refused in (
        staff.put(url, {"cost": 2}, format="json", HTTP_IF_MATCH=opened),
        staff.delete(url, HTTP_IF_MATCH=opened),
    ):
        assert refused.status_code == 412
        assert "changed since" in refused.json()["detail"][0]
    assert WorkflowCost.objects.get(org=tenants.org_a).cost == 4
    assert OrgChange.objects.count() == 1

    current = staff.get(url)["ETag"]
    put = staff.put(url, {"cost": 2}, format="json", HTTP_IF_MATCH=current)
    assert put.status_code == 200
    assert put["ETag"] == staff.get(url)["ETag"] != current
    assert staff.delete(url, HTTP_IF_MATCH=put["ETag"]).status_code == 204
    assert not WorkflowCost.objects.exists()


def test_the_cost_list_gives_each_override_the_etag_of_its_own_get(tenants: Tenants, client_for: Client) -> None:
    """A client edits an override straight from the list, with If-Match and no GET of its own."""
    from tests.factories import WorkflowFactory

    WorkflowFactory(name="simulate")
    staff = client_for(tenants.staff)
    for name, cost in (("render", 4), ("simulate", 7)):
        assert staff.put(f"/api/v1/orgs/acme/costs/{name}/", {"cost": cost}, format="json").status_code == 200

    listed = staff.get("/api/v1/orgs/acme/costs/").json()

    assert [item["workflow"] for item in listed] == ["render", "simulate"]
    for item in listed:
        assert STRONG.match(item["etag"])
        assert item["etag"] == staff.get(f"/api/v1/orgs/acme/costs/{item['workflow']}/")["ETag"]
    render = listed[0]["etag"]
    assert (
        staff.put("/api/v1/orgs/acme/costs/render/", {"cost": 5}, format="json", HTTP_IF_MATCH=render).status_code
        == 200
    )
    stale = staff.put("/api/v1/orgs/acme/costs/render/", {"cost": 6}, format="json", HTTP_IF_MATCH=render)
    assert stale.status_code == 412
    assert WorkflowCost.objects.get(org=tenants.org_a, workflow__name="render").cost == 5
    schema = APIClient().get("/api/schema/?format=json").json()
    item = schema["paths"]["/api/v1/orgs/{slug}/costs/"]["get"]["responses"]["200"]["content"]["application/json"]
    listed_schema = schema["components"]["schemas"][item["schema"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert "If-Match" in listed_schema["properties"]["etag"]["description"]


@pytest.mark.parametrize(
    ("path", "edit"),
    [
        ("/api/v1/orgs/{slug}/", "patch"),
        ("/api/v1/workflows/{name}/", "patch"),
        ("/api/v1/scheduler/config/", "patch"),
        ("/api/v1/orgs/{slug}/costs/{workflow}/", "put"),
    ],
)
def test_the_schema_documents_etag_if_match_and_412(tenants: Tenants, path: str, edit: str) -> None:
    schema = APIClient().get("/api/schema/?format=json").json()
    get, patch = schema["paths"][path]["get"], schema["paths"][path][edit]
    assert "ETag" in get["responses"]["200"]["headers"]
    assert "ETag" in patch["responses"]["200"]["headers"]
    (if_match,) = [p for p in patch["parameters"] if p["name"] == "If-Match"]
    assert (if_match["in"], if_match.get("required", False)) == ("header", False)
    assert patch["responses"]["412"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error412"
    }
    assert "412" not in get["responses"]
    assert "412" not in schema["paths"]["/api/v1/orgs/{slug}/hold/"]["post"]["responses"]
