"""API tokens: an org token acts only within its org; a staff token needs a staff user."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from charts.models import Chart
from orgs.access import api_token_issue
from orgs.models import ApiToken, Membership
from tests.conftest import Tenants
from tests.factories import MembershipFactory

TokenClient = Callable[[str], APIClient]


def test_org_token_acts_only_within_its_org(
    tenants: Tenants, token_client: TokenClient, org_token: str, chart_a: Chart, chart_b: Chart
) -> None:
    MembershipFactory(user=tenants.member_a, org=tenants.org_b)  # alice is in both orgs now
    client = token_client(org_token)

    listing = client.get("/api/v1/charts/").json()["results"]
    filtered = client.get("/api/v1/charts/?org=beta").json()["results"]
    submit_implied = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "t"}, format="json")
    submit_beta = client.post(
        "/api/v1/charts/", {"org": "beta", "workflow": "render", "external_id": "t"}, format="json"
    )
    bulk_beta = client.post(
        "/api/v1/charts/bulk/", {"org": "beta", "items": [{"workflow": "render", "external_id": "u"}]}, format="json"
    )

    assert [row["id"] for row in listing] == [chart_a.pk]
    assert filtered == []
    assert client.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 404
    assert client.post(f"/api/v1/charts/{chart_b.pk}/cancel/").status_code == 404
    assert submit_implied.status_code == 201
    assert submit_implied.json()["org"] == "acme"
    assert submit_beta.status_code == 400
    assert bulk_beta.status_code == 400
    assert not Chart.objects.filter(org=tenants.org_b).exclude(pk=chart_b.pk).exists()
    assert [o["slug"] for o in client.get("/api/v1/orgs/").json()["results"]] == ["acme"]
    assert client.get("/api/v1/orgs/beta/").status_code == 404


def test_org_token_of_a_staff_user_is_not_staff(tenants: Tenants, token_client: TokenClient, chart_b: Chart) -> None:
    MembershipFactory(user=tenants.staff, org=tenants.org_a)
    client = token_client(api_token_issue(user=tenants.staff, org=tenants.org_a))  # type: ignore[arg-type]

    assert client.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 404
    assert client.get("/api/v1/scheduler/config/").status_code == 403


def test_staff_token(tenants: Tenants, token_client: TokenClient, staff_token: str, chart_b: Chart) -> None:
    client = token_client(staff_token)

    assert client.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 200
    assert client.get("/api/v1/scheduler/config/").status_code == 200
    tenants.staff.is_staff = False
    tenants.staff.save()
    assert client.get("/api/v1/charts/").status_code == 401


def test_token_stops_when_membership_ends(tenants: Tenants, token_client: TokenClient, org_token: str) -> None:
    client = token_client(org_token)
    assert client.get("/api/v1/charts/").status_code == 200

    Membership.objects.filter(user=tenants.member_a).delete()

    assert client.get("/api/v1/charts/").status_code == 401


def test_token_stops_when_user_is_deactivated(tenants: Tenants, token_client: TokenClient, org_token: str) -> None:
    tenants.member_a.is_active = False
    tenants.member_a.save()

    assert token_client(org_token).get("/api/v1/charts/").status_code == 401


def test_bad_tokens_are_401(tenants: Tenants, token_client: TokenClient) -> None:
    assert token_client("0" * 40).get("/api/v1/charts/").status_code == 401
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token a b")
    assert client.get("/api/v1/charts/").status_code == 401
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION="Bearer nope")
    response = bearer.get("/api/v1/charts/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_token_is_stored_as_a_digest_and_records_use(
    tenants: Tenants, token_client: TokenClient, org_token: str
) -> None:
    token = ApiToken.objects.get()
    assert org_token not in (token.key_hash, token.prefix)
    assert len(org_token) == 40
    assert token.last_used_at is None

    token_client(org_token).get("/api/v1/charts/")

    token.refresh_from_db()
    assert token.last_used_at is not None


def test_bearer_keyword_works(tenants: Tenants, org_token: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {org_token}")

    assert client.get("/api/v1/charts/").status_code == 200


def test_token_writes_need_no_csrf(tenants: Tenants, org_token: str) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {org_token}")

    response = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "t"}, format="json")

    assert response.status_code == 201


def test_viewer_org_token_reads_but_does_not_write(tenants: Tenants, token_client: TokenClient, chart_a: Chart) -> None:
    Membership.objects.filter(user=tenants.member_a).update(role=Membership.Role.VIEWER)
    client = token_client(api_token_issue(user=tenants.member_a, org=tenants.org_a))  # type: ignore[arg-type]

    assert client.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 200
    assert client.post(f"/api/v1/charts/{chart_a.pk}/cancel/").status_code == 403
    assert client.post("/api/v1/charts/", {"workflow": "render", "external_id": "v"}, format="json").status_code == 403


def test_the_token_list_query_is_strict(tenants: Tenants, token_client: TokenClient, staff_token: str) -> None:
    unknown = token_client(staff_token).get("/api/v1/tokens/?colour=red")

    assert (unknown.status_code, unknown.json()) == (400, {"colour": ["unknown query parameter"]})
