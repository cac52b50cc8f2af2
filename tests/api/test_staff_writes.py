"""Staff writes through the API: workflows, orgs, memberships and tokens, by the admin's services.

Tenants (members, org tokens, outsiders) get 403 on every one of them; bad input is a 400 naming the
field with nothing written, a duplicate a 409.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from orgs.access import api_token_issue
from orgs.models import ApiToken, Membership, Org, OrgChange, Workflow
from tests.conftest import Tenants
from tests.factories import ProviderFactory, UserFactory

Client = Callable[[Any], APIClient]
TokenClient = Callable[[str], APIClient]

NEW_WORKFLOW = {
    "name": "export",
    "workflow_type": "ExportWorkflow",
    "task_queue": "exports",
    "default_cost": 3,
    "run_timeout": 900,
    "initial_duration": 30,
    "provider": "geo-api",
    "params": {"format": "pdf"},
}
STAFF_WRITES = [
    ("post", "/api/v1/workflows/", NEW_WORKFLOW),
    ("patch", "/api/v1/workflows/render/", {"default_cost": 5}),
    ("post", "/api/v1/orgs/", {"name": "Gamma", "slug": "gamma"}),
    ("get", "/api/v1/orgs/acme/members/", None),
    ("post", "/api/v1/orgs/acme/members/", {"user": "olga", "role": "viewer"}),
    ("post", "/api/v1/orgs/beta/members/", {"user": "olga", "role": "admin"}),
    ("patch", "/api/v1/orgs/acme/members/alice/", {"role": "viewer"}),
    ("delete", "/api/v1/orgs/beta/members/bob/", None),
    ("get", "/api/v1/tokens/", None),
    ("post", "/api/v1/tokens/", {"user": "alice", "org": "acme"}),
    ("delete", "/api/v1/tokens/1/", None),
]


def written() -> tuple[Any, ...]:
    return (
        sorted(Workflow.objects.values_list("name", "default_cost")),
        sorted(Org.objects.values_list("slug", flat=True)),
        sorted(Membership.objects.values_list("user__username", "org__slug", "role")),
        ApiToken.objects.count(),
        OrgChange.objects.count(),
    )


@pytest.fixture(autouse=True)
def geo_api(tenants: Tenants) -> None:
    ProviderFactory(slug="geo-api")


@pytest.mark.parametrize("who", ["member_a", "member_b", "outsider"])
@pytest.mark.parametrize(("method", "url", "body"), STAFF_WRITES)
def test_tenants_get_403(tenants: Tenants, client_for: Client, who: str, method: str, url: str, body: Any) -> None:
    before = written()

    response = getattr(client_for(getattr(tenants, who)), method)(url, body, format="json")

    assert response.status_code == 403
    assert written() == before


@pytest.mark.parametrize(("method", "url", "body"), STAFF_WRITES)
def test_org_tokens_get_403_even_of_a_staff_user(
    tenants: Tenants, token_client: TokenClient, method: str, url: str, body: Any
) -> None:
    Membership.objects.create(user=tenants.staff, org=tenants.org_a)
    secret = api_token_issue(user=tenants.staff, org=tenants.org_a)
    before = written()

    response = getattr(token_client(secret), method)(url, body, format="json")

    assert response.status_code == 403
    assert written() == before


@pytest.mark.parametrize(("method", "url", "body"), STAFF_WRITES)
def test_anonymous_is_refused(tenants: Tenants, method: str, url: str, body: Any) -> None:
    response = getattr(APIClient(), method)(url, body, format="json")

    assert response.status_code in {401, 403}


# --- workflows -----------------------------------------------------------------------------------


def test_staff_register_a_workflow_and_members_read_it(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.staff).post("/api/v1/workflows/", NEW_WORKFLOW, format="json")

    assert response.status_code == 201, response.json()
    assert response.json() == {**NEW_WORKFLOW, "effective_run_timeout": 900}
    workflow = Workflow.objects.get(name="export")
    assert (workflow.workflow_type, workflow.task_queue, workflow.provider and workflow.provider.slug) == (
        "ExportWorkflow",
        "exports",
        "geo-api",
    )
    assert workflow.params == {"format": "pdf"}
    read = client_for(tenants.member_a).get("/api/v1/workflows/export/").json()
    assert (read["cost"], read["provider"], read["run_timeout"]) == (3, "geo-api", 900)


def test_a_workflow_takes_defaults(tenants: Tenants, client_for: Client) -> None:
    body = {"name": "scan", "workflow_type": "ScanWorkflow", "task_queue": "scans"}

    response = client_for(tenants.staff).post("/api/v1/workflows/", body, format="json")

    assert response.status_code == 201
    assert (response.json()["default_cost"], response.json()["provider"], response.json()["params"]) == (1, None, {})
    assert response.json()["run_timeout"] is None


def test_a_workflow_name_in_use_is_409(tenants: Tenants, client_for: Client) -> None:
    before = written()

    response = client_for(tenants.staff).post("/api/v1/workflows/", {**NEW_WORKFLOW, "name": "render"}, format="json")

    assert response.status_code == 409
    assert "name" in response.json()
    assert written() == before


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": 5}, "name"),
        ({"workflow_type": None}, "workflow_type"),
        ({"task_queue": "a" * 201}, "task_queue"),
        ({"default_cost": 0}, "default_cost"),
        ({"default_cost": "3"}, "default_cost"),
        ({"run_timeout": 0}, "run_timeout"),
        ({"provider": "nope"}, "provider"),
        ({"params": ["x"]}, "params"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_workflow_is_400_naming_the_field(
    tenants: Tenants, client_for: Client, change: dict[str, Any], field: str
) -> None:
    before = written()

    response = client_for(tenants.staff).post("/api/v1/workflows/", {**NEW_WORKFLOW, **change}, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert written() == before


def test_staff_change_every_field_of_a_workflow(tenants: Tenants, client_for: Client) -> None:
    change = {**NEW_WORKFLOW, "name": "render-v2", "run_timeout": None}

    response = client_for(tenants.staff).patch("/api/v1/workflows/render/", change, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["name"] == "render-v2"
    workflow = Workflow.objects.get(pk=tenants.workflow.pk)
    assert (workflow.name, workflow.workflow_type, workflow.task_queue, workflow.default_cost) == (
        "render-v2",
        "ExportWorkflow",
        "exports",
        3,
    )
    assert workflow.provider is not None
    assert workflow.provider.slug == "geo-api"
    cleared = client_for(tenants.staff).patch("/api/v1/workflows/render-v2/", {"provider": None}, format="json")
    assert cleared.json()["provider"] is None


def test_a_bad_change_writes_nothing(tenants: Tenants, client_for: Client) -> None:
    Workflow.objects.create(name="scan", workflow_type="ScanWorkflow", task_queue="scans")
    client = client_for(tenants.staff)

    renamed = client.patch("/api/v1/workflows/render/", {"name": "scan", "default_cost": 9}, format="json")
    half = client.patch("/api/v1/workflows/render/", {"default_cost": 9, "provider": "nope"}, format="json")

    assert renamed.status_code == 409
    assert half.status_code == 400
    assert "provider" in half.json()
    assert Workflow.objects.get(pk=tenants.workflow.pk).default_cost == 1
    assert client.patch("/api/v1/workflows/nope/", {"default_cost": 2}, format="json").status_code == 404


# --- orgs and memberships ------------------------------------------------------------------------


def test_staff_create_an_org(tenants: Tenants, client_for: Client) -> None:
    body = {"name": "Gamma Corp", "weight": 3, "max_concurrency": 2, "queue_limit": 100}

    response = client_for(tenants.staff).post("/api/v1/orgs/", body, format="json")

    assert response.status_code == 201, response.json()
    assert (response.json()["slug"], response.json()["weight"], response.json()["queue_limit"]) == (
        "gamma-corp",
        3,
        100,
    )
    org = Org.objects.get(slug="gamma-corp")
    assert (org.weight, org.max_concurrency, org.queue_limit) == (3, 2, 100)
    assert OrgChange.objects.filter(org=org, field="created", actor__contains="stella").exists()


def test_an_org_slug_in_use_is_409(tenants: Tenants, client_for: Client) -> None:
    before = written()

    response = client_for(tenants.staff).post("/api/v1/orgs/", {"name": "Acme again", "slug": "acme"}, format="json")

    assert response.status_code == 409
    assert "slug" in response.json()
    assert written() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": "G", "weight": -1}, "weight"),
        ({"name": "G", "weight": 10_001}, "weight"),
        ({"name": "G", "max_concurrency": 0}, "max_concurrency"),
        ({"name": "G", "queue_limit": "many"}, "queue_limit"),
        ({"name": "G", "slug": "not a slug"}, "slug"),
        ({"name": "G", "served": 3}, "served"),
    ],
)
def test_a_bad_org_is_400_naming_the_field(
    tenants: Tenants, client_for: Client, body: dict[str, Any], field: str
) -> None:
    before = written()

    response = client_for(tenants.staff).post("/api/v1/orgs/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert written() == before


def test_staff_add_and_list_members(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.staff)

    added = client.post("/api/v1/orgs/acme/members/", {"user": "olga", "role": "viewer"}, format="json")
    again = client.post("/api/v1/orgs/acme/members/", {"user": "olga", "role": "admin"}, format="json")
    listing = client.get("/api/v1/orgs/acme/members/").json()

    assert added.status_code == 201
    assert added.json()["role"] == "viewer"
    assert again.status_code == 409
    assert [(m["user"], m["role"]) for m in listing] == [("alice", "member"), ("olga", "viewer")]
    assert OrgChange.objects.filter(org=tenants.org_a, field="member", new_value="olga (viewer)").exists()
    # The new viewer reads acme now, and may not write in it.
    olga = client_for(tenants.outsider)
    assert olga.get("/api/v1/orgs/acme/").status_code == 200
    refused = olga.post("/api/v1/charts/", {"org": "acme", "workflow": "render", "external_id": "x"}, format="json")
    assert refused.status_code == 403


@pytest.mark.parametrize(
    ("body", "field"),
    [({"user": "nobody"}, "user"), ({"user": "olga", "role": "owner"}, "role"), ({"role": "viewer"}, "user")],
)
def test_a_bad_membership_is_400(tenants: Tenants, client_for: Client, body: dict[str, Any], field: str) -> None:
    before = written()

    response = client_for(tenants.staff).post("/api/v1/orgs/acme/members/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert written() == before


def test_staff_change_a_role_and_remove_a_member(
    tenants: Tenants, client_for: Client, token_client: TokenClient
) -> None:
    client = client_for(tenants.staff)
    secret = api_token_issue(user=tenants.member_a, org=tenants.org_a)

    viewer = client.patch("/api/v1/orgs/acme/members/alice/", {"role": "viewer"}, format="json")
    refused = token_client(secret).post(
        "/api/v1/charts/", {"workflow": "render", "external_id": "after-demotion"}, format="json"
    )
    removed = client.delete("/api/v1/orgs/acme/members/alice/")

    assert viewer.status_code == 200
    assert viewer.json()["role"] == "viewer"
    assert refused.status_code == 403
    assert removed.status_code == 204
    assert not Membership.objects.filter(user=tenants.member_a).exists()
    assert token_client(secret).get("/api/v1/orgs/").status_code in {401, 403}  # its token stops with it
    assert list(OrgChange.objects.filter(org=tenants.org_a, field="member").values_list("old_value", "new_value")) == [
        ("alice (viewer)", ""),
        ("alice (member)", "alice (viewer)"),
    ]
    assert client.delete("/api/v1/orgs/acme/members/alice/").status_code == 404
    assert client.patch("/api/v1/orgs/beta/members/alice/", {"role": "admin"}, format="json").status_code == 404
    assert client.patch("/api/v1/orgs/beta/members/bob/", {"role": "owner"}, format="json").status_code == 400


def test_members_of_an_unknown_org_is_404(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.staff).post("/api/v1/orgs/nope/members/", {"user": "olga"}, format="json")

    assert response.status_code == 404


# --- tokens --------------------------------------------------------------------------------------


def test_staff_issue_an_org_token_shown_once_that_works(
    tenants: Tenants, client_for: Client, token_client: TokenClient
) -> None:
    client = client_for(tenants.staff)

    issued = client.post("/api/v1/tokens/", {"user": "alice", "org": "acme", "name": "ci"}, format="json")

    assert issued.status_code == 201, issued.json()
    body = issued.json()
    assert (body["user"], body["org"], body["staff"], body["name"]) == ("alice", "acme", False, "ci")
    assert body["secret"].startswith(body["prefix"])
    assert token_client(body["secret"]).get("/api/v1/orgs/").json()["results"][0]["slug"] == "acme"
    listing = client.get("/api/v1/tokens/").json()["results"]
    assert [row["id"] for row in listing] == [body["id"]]
    assert "secret" not in listing[0]


def test_staff_issue_a_staff_token(tenants: Tenants, client_for: Client, token_client: TokenClient) -> None:
    issued = client_for(tenants.staff).post("/api/v1/tokens/", {"user": "stella", "staff": True}, format="json")

    assert issued.status_code == 201
    assert token_client(issued.json()["secret"]).get("/api/v1/tokens/").status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user": "alice"}, "org"),
        ({"user": "alice", "org": "acme", "staff": True}, "org"),
        ({"user": "alice", "org": "beta"}, "user"),  # not a member of beta
        ({"user": "alice", "staff": True}, "user"),  # not staff
        ({"user": "nobody", "org": "acme"}, "user"),
        ({"user": "alice", "org": "nope"}, "org"),
        ({"user": "alice", "org": "acme", "staff": "yes"}, "staff"),
    ],
)
def test_a_bad_token_request_is_400(tenants: Tenants, client_for: Client, body: dict[str, Any], field: str) -> None:
    response = client_for(tenants.staff).post("/api/v1/tokens/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not ApiToken.objects.exists()


def test_staff_revoke_a_token_and_it_stops_working(
    tenants: Tenants, client_for: Client, token_client: TokenClient
) -> None:
    client = client_for(tenants.staff)
    issued = client.post("/api/v1/tokens/", {"user": "alice", "org": "acme"}, format="json").json()

    revoked = client.delete(f"/api/v1/tokens/{issued['id']}/")

    assert revoked.status_code == 204
    assert not ApiToken.objects.exists()
    assert token_client(issued["secret"]).get("/api/v1/orgs/").status_code in {401, 403}
    assert client.delete(f"/api/v1/tokens/{issued['id']}/").status_code == 404


def test_a_member_cannot_revoke_their_own_token(
    tenants: Tenants, client_for: Client, token_client: TokenClient
) -> None:
    issued = client_for(tenants.staff).post("/api/v1/tokens/", {"user": "alice", "org": "acme"}, format="json").json()

    response = token_client(issued["secret"]).delete(f"/api/v1/tokens/{issued['id']}/")

    assert response.status_code == 403
    assert ApiToken.objects.count() == 1


def test_a_new_user_can_be_given_a_token_after_a_membership(tenants: Tenants, client_for: Client) -> None:
    UserFactory(username="dana")
    client = client_for(tenants.staff)

    refused = client.post("/api/v1/tokens/", {"user": "dana", "org": "beta"}, format="json")
    client.post("/api/v1/orgs/beta/members/", {"user": "dana"}, format="json")
    issued = client.post("/api/v1/tokens/", {"user": "dana", "org": "beta"}, format="json")

    assert refused.status_code == 400
    assert issued.status_code == 201
