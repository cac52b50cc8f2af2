"""Providers in the API: anyone signed in reads them with the pauses in force that apply to them
(for everyone, or for their own org), never another org's pause and never who set it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from orgs.models import OrgChange, Provider, ProviderPause
from tests.conftest import Tenants
from tests.factories import MembershipFactory, ProviderFactory

Client = Callable[[Any], APIClient]


@pytest.fixture
def gpu(tenants: Tenants) -> Provider:
    """gpu-east: paused for everyone for 10 min, for acme for 30 min, for beta for an hour; an
    expired pause of acme's; and geo-api, never paused."""
    now = timezone.now()
    gpu = ProviderFactory(slug="gpu-east", name="GPU East")
    ProviderFactory(slug="geo-api", name="Geo API")
    for org, minutes, reason in (
        (None, 10, "provider-wide limit"),
        (tenants.org_a, 30, "throttled by gpu-east"),
        (tenants.org_b, 60, "beta's own throttle"),
        (tenants.org_a, -5, "over"),
    ):
        ProviderPause.objects.create(
            provider=gpu, org=org, until=now + timedelta(minutes=minutes), reason=reason, created_by="user:stella"
        )
    return gpu


def pauses(provider: dict[str, Any]) -> list[tuple[str | None, str]]:
    return [(pause["org"], pause["reason"]) for pause in provider["pauses"]]


def test_a_member_sees_the_pauses_for_everyone_and_for_its_org_only(
    tenants: Tenants, client_for: Client, gpu: Provider
) -> None:
    response = client_for(tenants.member_a).get("/api/v1/providers/")

    assert response.status_code == 200
    geo, east = response.json()["results"]
    assert (geo["slug"], geo["name"], geo["paused_until"], geo["pauses"]) == ("geo-api", "Geo API", None, [])
    assert pauses(east) == [(None, "provider-wide limit"), ("acme", "throttled by gpu-east")]
    assert east["paused_until"] == east["pauses"][-1]["until"]
    text = response.content.decode()
    assert "beta" not in text
    assert "stella" not in text


def test_each_org_sees_its_own_pause(tenants: Tenants, client_for: Client, gpu: Provider) -> None:
    east = client_for(tenants.member_b).get("/api/v1/providers/gpu-east/").json()

    assert pauses(east) == [(None, "provider-wide limit"), ("beta", "beta's own throttle")]
    assert east["paused_until"] == east["pauses"][-1]["until"]


def test_a_user_in_no_org_sees_only_the_pauses_for_everyone(
    tenants: Tenants, client_for: Client, gpu: Provider
) -> None:
    east = client_for(tenants.outsider).get("/api/v1/providers/gpu-east/").json()

    assert pauses(east) == [(None, "provider-wide limit")]


def test_a_member_of_two_orgs_sees_both_and_an_org_token_only_its_org(
    tenants: Tenants, client_for: Client, token_client: Callable[[str], APIClient], org_token: str, gpu: Provider
) -> None:
    MembershipFactory(user=tenants.member_a, org=tenants.org_b)

    both = client_for(tenants.member_a).get("/api/v1/providers/gpu-east/").json()
    scoped = token_client(org_token).get("/api/v1/providers/gpu-east/").json()

    assert [org for org, _ in pauses(both)] == [None, "acme", "beta"]
    assert [org for org, _ in pauses(scoped)] == [None, "acme"]


def test_staff_see_every_pause_in_force(tenants: Tenants, client_for: Client, gpu: Provider) -> None:
    east = client_for(tenants.staff).get("/api/v1/providers/gpu-east/").json()

    assert [org for org, _ in pauses(east)] == [None, "acme", "beta"]


def test_an_unknown_provider_is_404_and_anonymous_callers_are_refused(
    tenants: Tenants, client_for: Client, gpu: Provider
) -> None:
    assert client_for(tenants.member_a).get("/api/v1/providers/nope/").status_code == 404
    assert client_for(None).get("/api/v1/providers/").status_code in (401, 403)


def test_only_reads_are_offered(tenants: Tenants, client_for: Client, gpu: Provider) -> None:
    staff = client_for(tenants.staff)

    assert staff.post("/api/v1/providers/", {"slug": "x", "name": "X"}, format="json").status_code == 405
    assert staff.delete("/api/v1/providers/gpu-east/").status_code == 405


def test_the_list_costs_a_fixed_number_of_queries(
    tenants: Tenants, client_for: Client, gpu: Provider, django_assert_num_queries: Any
) -> None:
    until = timezone.now() + timedelta(minutes=5)
    for i in range(15):
        provider = ProviderFactory(slug=f"p{i:02}")
        ProviderPause.objects.create(provider=provider, org=tenants.org_a, until=until, created_by="x")
        ProviderPause.objects.create(provider=provider, org=tenants.org_b, until=until, created_by="x")
    client = client_for(tenants.member_a)

    # session, user, scope, providers page, their pauses (with the orgs)
    with django_assert_num_queries(5):
        body = client.get("/api/v1/providers/?page_size=10").json()
    assert len(body["results"]) == 10
    assert all(pauses(provider) == [("acme", "")] for provider in body["results"][2:])


def test_the_schema_shows_the_providers(tenants: Tenants, client_for: Client) -> None:
    schema = client_for(tenants.member_a).get("/api/schema/?format=json").json()

    assert set(schema["paths"]["/api/v1/providers/"]) == {"get"}
    item = schema["paths"]["/api/v1/providers/{slug}/"]["get"]["responses"]["200"]["content"]["application/json"]
    provider = schema["components"]["schemas"][item["schema"]["$ref"].rsplit("/", 1)[-1]]
    assert set(provider["properties"]) == {"slug", "name", "paused_until", "pauses"}


# Staff resume a provider by its slug ------------------------------------------------------------------


def in_force(provider: Provider) -> list[str | None]:
    return sorted((pause.org.slug if pause.org else "") for pause in provider.pauses.filter(until__gt=timezone.now()))


def test_staff_resume_a_provider_for_one_org_then_for_everyone(
    tenants: Tenants, client_for: Client, gpu: Provider
) -> None:
    staff = client_for(tenants.staff)

    response = staff.post("/api/v1/providers/gpu-east/resume/", {"org": "acme"}, format="json")
    assert (response.status_code, response.json()) == (200, {"ended": 1})
    assert in_force(gpu) == ["", "beta"]
    assert OrgChange.objects.filter(org=tenants.org_a, field="provider:gpu-east", new_value="resumed").exists()

    response = staff.post("/api/v1/providers/gpu-east/resume/", {}, format="json")
    assert (response.status_code, response.json()) == (200, {"ended": 1})
    assert in_force(gpu) == ["beta"]

    again = staff.post("/api/v1/providers/gpu-east/resume/", {"org": None}, format="json")
    assert (again.status_code, again.json()) == (200, {"ended": 0})


@pytest.mark.parametrize("who", ["member_a", "member_b", "outsider"])
def test_tenants_cannot_resume_a_provider(tenants: Tenants, client_for: Client, gpu: Provider, who: str) -> None:
    for body in ({"org": "acme"}, {}):
        response = client_for(getattr(tenants, who)).post("/api/v1/providers/gpu-east/resume/", body, format="json")
        assert response.status_code == 403
    assert client_for(None).post("/api/v1/providers/gpu-east/resume/", {}, format="json").status_code in (401, 403)
    assert in_force(gpu) == ["", "acme", "beta"]


def test_an_org_token_cannot_resume_a_provider(
    tenants: Tenants, token_client: Callable[[str], APIClient], org_token: str, gpu: Provider
) -> None:
    client = token_client(org_token)
    assert client.post("/api/v1/providers/gpu-east/resume/", {"org": "acme"}, format="json").status_code == 403
    assert in_force(gpu) == ["", "acme", "beta"]


@pytest.mark.parametrize(
    ("body", "field"),
    [({"org": "nobody"}, "org"), ({"org": 3}, "org"), ({"org": "acme", "until": "now"}, "until")],
)
def test_a_bad_resume_is_400_naming_the_field(
    tenants: Tenants, client_for: Client, gpu: Provider, body: dict[str, Any], field: str
) -> None:
    response = client_for(tenants.staff).post("/api/v1/providers/gpu-east/resume/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert in_force(gpu) == ["", "acme", "beta"]


def test_resuming_an_unknown_provider_is_404(tenants: Tenants, client_for: Client) -> None:
    assert client_for(tenants.staff).post("/api/v1/providers/nope/resume/", {}, format="json").status_code == 404
