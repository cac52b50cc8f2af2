"""The zone a user reads times in is the account's: kept on the server, the same in every browser and
on the portal, the dashboard and the admin; validated against the IANA names; absent, the browser's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from common.errors import InvalidInput
from orgs.access import AccountBackend
from orgs.context_processors import viewer_zone as viewer_zone_context
from orgs.models import ViewerZone
from orgs.selectors import viewer_zone
from orgs.services import viewer_zone_set
from tests.conftest import Tenants

META = re.compile(r'<meta name="fairsched-zone" content="([^"]*)"')


def client_for(user: Any) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_login(user)
    return client


def test_a_zone_is_kept_per_account_and_cleared(tenants: Tenants) -> None:
    assert viewer_zone(user_id=tenants.member_a.pk) is None
    assert viewer_zone_set(user=tenants.member_a, zone="Asia/Tokyo") == "Asia/Tokyo"
    assert viewer_zone_set(user=tenants.member_a, zone="Europe/Berlin") == "Europe/Berlin"

    assert viewer_zone(user_id=tenants.member_a.pk) == "Europe/Berlin"
    assert ViewerZone.objects.filter(user=tenants.member_a).count() == 1
    assert viewer_zone(user_id=tenants.member_b.pk) is None  # another account is unaffected
    assert viewer_zone_set(user=tenants.member_a, zone=None) is None
    assert viewer_zone(user_id=tenants.member_a.pk) is None
    assert viewer_zone_set(user=tenants.member_a, zone="") is None


@pytest.mark.parametrize("zone", ["Mars/Olympus", "europe/berlin", "CET ", "../etc/passwd", "x" * 64])
def test_a_zone_that_is_no_iana_name_is_refused_by_its_field(tenants: Tenants, zone: str) -> None:
    viewer_zone_set(user=tenants.member_a, zone="Asia/Tokyo")
    with pytest.raises(InvalidInput) as refused:
        viewer_zone_set(user=tenants.member_a, zone=zone)
    assert refused.value.field == "zone"
    assert viewer_zone(user_id=tenants.member_a.pk) == "Asia/Tokyo"


def test_the_api_reads_and_sets_the_callers_zone(tenants: Tenants) -> None:
    alice, bob = client_for(tenants.member_a), client_for(tenants.member_b)
    assert alice.get("/api/v1/me/zone/").json() == {"zone": None}

    put = alice.put("/api/v1/me/zone/", {"zone": "America/New_York"}, format="json")
    assert (put.status_code, put.json()) == (200, {"zone": "America/New_York"})
    assert alice.get("/api/v1/me/zone/").json() == {"zone": "America/New_York"}
    assert bob.get("/api/v1/me/zone/").json() == {"zone": None}

    assert alice.put("/api/v1/me/zone/", {"zone": None}, format="json").json() == {"zone": None}
    assert alice.get("/api/v1/me/zone/").json() == {"zone": None}


@pytest.mark.parametrize(
    "body", [{"zone": "Mars/Olympus"}, {"zone": 9}, {"zone": "x" * 65}, {}, {"zone": "UTC", "colour": "red"}]
)
def test_the_api_refuses_a_bad_zone_naming_the_field(tenants: Tenants, body: dict[str, Any]) -> None:
    response = client_for(tenants.member_a).put("/api/v1/me/zone/", body, format="json")
    assert response.status_code == 400
    assert set(response.json()) == ({"colour"} if "colour" in body else {"zone"})
    assert viewer_zone(user_id=tenants.member_a.pk) is None


def test_the_api_asks_for_a_signed_in_user(tenants: Tenants) -> None:
    assert client_for(None).put("/api/v1/me/zone/", {"zone": "UTC"}, format="json").status_code in (401, 403)


@pytest.mark.parametrize("path", ["/portal/acme/", "/dashboard/", "/admin/"])
def test_every_interface_names_the_accounts_zone_in_its_first_render(tenants: Tenants, path: str) -> None:
    user = tenants.staff if path != "/portal/acme/" else tenants.member_a
    viewer_zone_set(user=user, zone="Asia/Kolkata")
    client = Client()
    client.force_login(user)
    page = client.get(path).content.decode()
    assert META.findall(page) == ["Asia/Kolkata"]
    assert 'id="zone-choice"' in page
    # The script that reads it is in the head, not deferred: it runs before the body is painted.
    head = page[: page.index("</head>")]
    assert re.search(r'<script src="[^"]*zone[^"]*\.js"></script>', head)

    viewer_zone_set(user=user, zone=None)
    assert META.findall(client.get(path).content.decode()) == [""]


def test_the_zone_comes_with_the_signed_in_user_in_one_query(tenants: Tenants, django_assert_num_queries: Any) -> None:
    viewer_zone_set(user=tenants.member_a, zone="Asia/Tokyo")
    request = RequestFactory().get("/")
    with django_assert_num_queries(1):
        request.user = AccountBackend().get_user(tenants.member_a.pk)
        assert viewer_zone_context(request) == {"viewer_zone": "Asia/Tokyo"}
    with django_assert_num_queries(1):
        request.user = AccountBackend().get_user(tenants.member_b.pk)
        assert viewer_zone_context(request) == {"viewer_zone": ""}
