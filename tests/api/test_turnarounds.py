"""Turnaround promises: staff set an org's target and its per-workflow overrides (with ETags and
history); the org's members read them but cannot set them; bad values are a 400 naming the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from orgs.levers import TURNAROUND, Target
from orgs.models import Org, OrgChange, WorkflowTurnaround
from orgs.selectors import turnaround_targets
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db

Client = Callable[[Any], APIClient]
ORG = "/api/v1/orgs/acme/"
RENDER = "/api/v1/orgs/acme/turnarounds/render/"


def history(org: Org) -> list[tuple[str, str, str, str, str]]:
    rows = OrgChange.objects.filter(org=org).order_by("id")
    return [(c.actor, c.field, c.old_value, c.new_value, c.reason) for c in rows]


def test_staff_set_the_orgs_target_and_share_with_a_reason(tenants: Tenants, client_for: Client) -> None:
    staff = client_for(tenants.staff)

    response = staff.patch(ORG, {"turnaround": 86400, "turnaround_share": 0.95, "reason": "contract"}, format="json")

    assert response.status_code == 200, response.json()
    assert (response.json()["turnaround"], response.json()["turnaround_share"]) == (86400, 0.95)
    org = Org.objects.get(slug="acme")
    assert (org.turnaround, org.turnaround_share) == (86400, 0.95)
    assert history(org) == [
        ("user:stella", "turnaround", "", "86400", "contract"),
        ("user:stella", "turnaround_share", "", "0.95", "contract"),
    ]
    cleared = staff.patch(ORG, {"turnaround": None}, format="json")
    assert cleared.json()["turnaround"] is None
    assert history(org)[-1][1:4] == ("turnaround", "86400", "")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"turnaround": 0}, "turnaround"),
        ({"turnaround": -5}, "turnaround"),
        ({"turnaround": "3600"}, "turnaround"),
        ({"turnaround": 1.5}, "turnaround"),
        ({"turnaround": TURNAROUND.maximum + 1}, "turnaround"),
        ({"turnaround": 10**30}, "turnaround"),
        ({"turnaround_share": 0}, "turnaround_share"),
        ({"turnaround_share": -0.1}, "turnaround_share"),
        ({"turnaround_share": 1.01}, "turnaround_share"),
        ({"turnaround_share": "0.9"}, "turnaround_share"),
        ({"turnaround_share": True}, "turnaround_share"),
    ],
)
def test_a_bad_target_is_a_400_naming_the_field(
    tenants: Tenants, client_for: Client, body: dict[str, Any], field: str
) -> None:
    response = client_for(tenants.staff).patch(ORG, body, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {field}
    org = Org.objects.get(slug="acme")
    assert (org.turnaround, org.turnaround_share) == (None, None)
    assert not OrgChange.objects.exists()


def test_the_orgs_etag_covers_its_targets(tenants: Tenants, client_for: Client) -> None:
    staff = client_for(tenants.staff)
    opened = staff.get(ORG)["ETag"]
    staff.patch(ORG, {"turnaround": 3600}, format="json")

    stale = staff.patch(ORG, {"turnaround_share": 0.9}, format="json", HTTP_IF_MATCH=opened)

    assert stale.status_code == 412
    assert Org.objects.get(slug="acme").turnaround_share is None


def test_staff_put_patch_and_delete_a_workflows_turnaround(tenants: Tenants, client_for: Client) -> None:
    staff = client_for(tenants.staff)
    none = staff.get(RENDER)
    assert none.json() == {"workflow": "render", "turnaround": None, "share": None}

    put = staff.put(
        RENDER, {"turnaround": 7200, "share": 0.9, "reason": "rush tier"}, format="json", HTTP_IF_MATCH=none["ETag"]
    )
    assert put.status_code == 200, put.json()
    assert put.json() == {"workflow": "render", "turnaround": 7200, "share": 0.9}
    assert put["ETag"] == staff.get(RENDER)["ETag"] != none["ETag"]

    patched = staff.patch(RENDER, {"turnaround": 3600}, format="json", HTTP_IF_MATCH=put["ETag"])
    assert patched.json() == {"workflow": "render", "turnaround": 3600, "share": 0.9}  # the share kept
    listed = staff.get("/api/v1/orgs/acme/turnarounds/").json()
    assert listed == [{"workflow": "render", "turnaround": 3600, "share": 0.9, "etag": patched["ETag"]}]

    stale = staff.delete(RENDER, HTTP_IF_MATCH=put["ETag"])
    assert stale.status_code == 412
    assert WorkflowTurnaround.objects.get().turnaround == 3600

    deleted = staff.delete(f"{RENDER}?reason=back+to+the+org", HTTP_IF_MATCH=patched["ETag"])
    assert deleted.status_code == 204
    assert not WorkflowTurnaround.objects.exists()
    assert history(tenants.org_a) == [
        ("user:stella", "turnaround:render", "org's", "7200", "rush tier"),
        ("user:stella", "turnaround_share:render", "org's", "0.9", "rush tier"),
        ("user:stella", "turnaround:render", "7200", "3600", ""),
        ("user:stella", "turnaround:render", "3600", "org's", "back to the org"),
        ("user:stella", "turnaround_share:render", "0.9", "org's", "back to the org"),
    ]


@pytest.mark.parametrize(
    ("method", "body", "field"),
    [
        ("put", {"turnaround": 0}, "turnaround"),
        ("put", {"turnaround": "1h"}, "turnaround"),
        ("put", {"turnaround": 10**12}, "turnaround"),
        ("put", {"share": 0.5}, "turnaround"),
        ("put", {"turnaround": 60, "share": 0}, "share"),
        ("put", {"turnaround": 60, "share": 2}, "share"),
        ("patch", {"share": 0.5}, "turnaround"),  # no override to change yet
    ],
)
def test_a_bad_workflow_turnaround_is_a_400_naming_the_field(
    tenants: Tenants, client_for: Client, method: str, body: dict[str, Any], field: str
) -> None:
    response = getattr(client_for(tenants.staff), method)(RENDER, body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not WorkflowTurnaround.objects.exists()


def test_members_read_their_orgs_targets_but_cannot_set_them(
    tenants: Tenants, client_for: Client, token_client: Callable[[str], APIClient], org_token: str
) -> None:
    WorkflowTurnaround.objects.create(org=tenants.org_a, workflow=tenants.workflow, turnaround=600)
    Org.objects.filter(pk=tenants.org_a.pk).update(turnaround=3600, turnaround_share=0.9)
    for member in (client_for(tenants.member_a), token_client(org_token)):
        org = member.get(ORG).json()
        assert (org["turnaround"], org["turnaround_share"]) == (3600, 0.9)
        assert member.get(RENDER).json()["turnaround"] == 600
        assert member.get("/api/v1/orgs/acme/turnarounds/").json()[0]["turnaround"] == 600
        assert member.get("/api/v1/orgs/beta/turnarounds/render/").status_code == 404

        for method, body in (("put", {"turnaround": 60}), ("patch", {"turnaround": 60}), ("delete", None)):
            refused = getattr(member, method)(RENDER, body, format="json")
            assert refused.status_code == 403
            assert "turnaround" in refused.json()
        assert member.patch(ORG, {"turnaround": 60}, format="json").status_code == 403

    assert WorkflowTurnaround.objects.get().turnaround == 600
    assert Org.objects.get(pk=tenants.org_a.pk).turnaround == 3600
    assert not OrgChange.objects.exists()


def test_the_effective_target_is_the_workflows_else_the_orgs_else_none(tenants: Tenants, client_for: Client) -> None:
    org, workflow = tenants.org_a, tenants.workflow
    assert turnaround_targets(org=org, workflow_ids=[workflow.pk]) == {workflow.pk: None}

    Org.objects.filter(pk=org.pk).update(turnaround=86400, turnaround_share=0.95)
    org.refresh_from_db()
    assert turnaround_targets(org=org, workflow_ids=[workflow.pk]) == {workflow.pk: Target(86400, 0.95)}

    WorkflowTurnaround.objects.create(org=org, workflow=workflow, turnaround=3600)
    assert turnaround_targets(org=org, workflow_ids=[workflow.pk]) == {workflow.pk: Target(3600, 0.95)}
    WorkflowTurnaround.objects.update(share=0.5)
    assert turnaround_targets(org=org, workflow_ids=[workflow.pk]) == {workflow.pk: Target(3600, 0.5)}
    # Another org's override is not this org's.
    assert turnaround_targets(org=tenants.org_b, workflow_ids=[workflow.pk]) == {workflow.pk: None}
