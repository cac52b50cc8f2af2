"""The chart status read's own path (`charts/status_api.py`): the same checks and the same bytes as DRF's.

A plain token read is answered in one statement; `?format=json` sends the same read through DRF's
viewset, which is what the lean path must match, header for header and byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, ChartState, WaitingReason
from common.actors import Actor
from orgs.access import api_token_issue, api_token_revoke
from orgs.models import Membership
from tests.conftest import Tenants
from tests.factories import ChartFactory

TokenClient = Callable[[str], APIClient]


def charts_of_every_kind(tenants: Tenants) -> list[Chart]:
    """Charts as the status read meets them: planned and waiting, not yet planned, running, finished
    with a traceback, paused, in a held org, with a payload JSON must escape."""
    now = timezone.now()
    tenants.org_b.weight = 0
    tenants.org_b.save()
    make = ChartFactory
    return [
        make(
            org=tenants.org_a,
            workflow=tenants.workflow,
            position=3,
            predicted_start=now + timedelta(minutes=1),
            eta=now + timedelta(minutes=2, microseconds=123456),
            eta_low=now + timedelta(minutes=1),
            eta_high=now + timedelta(minutes=4),
            waiting_reason=WaitingReason.TURN,
            waiting_until=now + timedelta(minutes=1),
            priority=-3,
        ),
        make(
            org=tenants.org_a,
            workflow=tenants.workflow,
            payload={"n": 1, "text": "é \u2028 \u2029 ✓", "deep": [{"a": None}]},
        ),
        make(
            org=tenants.org_a,
            workflow=tenants.workflow,
            state=ChartState.RUNNING,
            started_at=now,
            attempt=1,
            high_priority=True,
        ),
        make(
            org=tenants.org_a,
            workflow=tenants.workflow,
            state=ChartState.FAILED,
            started_at=now - timedelta(minutes=5),
            finished_at=now,
            attempt=3,
            last_error='Traceback (most recent call last):\n  File "/srv/x.py", line 1\nValueError: bad frame',
        ),
        make(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.PAUSED, position=1),
        make(
            org=tenants.org_a,
            workflow=tenants.workflow,
            state=ChartState.RETRY_WAIT,
            available_at=now + timedelta(seconds=30),
            waiting_reason=WaitingReason.BACKOFF,
            waiting_until=now + timedelta(seconds=30),
            position=0,
        ),
        make(org=tenants.org_b, workflow=tenants.workflow, external_id="held"),
    ]


def lean_and_drf(client: APIClient, chart_id: int) -> tuple[Any, Any, int]:
    """The lean path's response, DRF's for the same read, and the lean path's statement count."""
    with CaptureQueriesContext(connection) as lean_queries:
        lean = client.get(f"/api/v1/charts/{chart_id}/")
    statements = len(lean_queries)  # read now: the next request starts a new log
    drf = client.get(f"/api/v1/charts/{chart_id}/", {"format": "json"})
    return lean, drf, statements


def test_the_same_response_as_drf_for_every_kind_of_chart(tenants: Tenants, token_client: TokenClient) -> None:
    charts = charts_of_every_kind(tenants)
    staff = token_client(api_token_issue(user=tenants.staff, staff=True))  # type: ignore[arg-type]
    staff.get("/api/v1/charts/")  # the first use records last_used_at
    for chart in charts:
        lean, drf, statements = lean_and_drf(staff, chart.pk)
        assert statements == 1, chart.state
        assert lean.status_code == drf.status_code == 200
        assert lean.content == drf.content, chart.state
        assert dict(lean.items()) == dict(drf.items())
    held = staff.get(f"/api/v1/charts/{charts[-1].pk}/").json()
    assert held["waiting_reason"] == "org_held"
    assert "\\u2028" in staff.get(f"/api/v1/charts/{charts[1].pk}/").content.decode()


def test_an_org_token_reads_its_own_org_and_nothing_else(
    tenants: Tenants, token_client: TokenClient, org_token: str, chart_a: Chart, chart_b: Chart
) -> None:
    """Another org's chart is the same 404 as a missing one, in one statement, and DRF's 404 too."""
    client = token_client(org_token)
    assert client.get(f"/api/v1/charts/{chart_a.pk}/").json()["external_id"] == "a-1"
    foreign, drf_foreign, statements = lean_and_drf(client, chart_b.pk)
    missing, drf_missing, _ = lean_and_drf(client, 10**12)
    assert statements == 1
    assert foreign.status_code == missing.status_code == drf_foreign.status_code == drf_missing.status_code == 404
    assert foreign.content == missing.content == drf_foreign.content == drf_missing.content
    assert dict(foreign.items()) == dict(drf_foreign.items())
    assert b"b-1" not in foreign.content
    # The other org's member reads it, and a viewer of acme reads acme's.
    assert (
        token_client(api_token_issue(user=tenants.member_b, org=tenants.org_b))
        .get(  # type: ignore[arg-type]
            f"/api/v1/charts/{chart_b.pk}/"
        )
        .status_code
        == 200
    )
    Membership.objects.filter(user=tenants.member_a, org=tenants.org_a).update(role=Membership.Role.VIEWER)
    assert client.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 200
    assert client.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 404


def test_a_token_that_may_no_longer_act_is_refused_at_once(
    tenants: Tenants, token_client: TokenClient, org_token: str, chart_a: Chart
) -> None:
    """Revoked, its user out of the org, deactivated, a staff token's user no longer staff: the next
    read is DRF's 401, nothing cached."""
    client = token_client(org_token)
    assert client.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 200
    Membership.objects.filter(user=tenants.member_a).delete()
    left = client.get(f"/api/v1/charts/{chart_a.pk}/")
    assert (left.status_code, left.json(), left["WWW-Authenticate"]) == (401, {"detail": "Invalid token."}, "Token")

    bob = token_client(api_token_issue(user=tenants.member_b, org=tenants.org_b))  # type: ignore[arg-type]
    chart_b = ChartFactory(org=tenants.org_b, workflow=tenants.workflow)
    assert bob.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 200
    tenants.member_b.is_active = False
    tenants.member_b.save()
    assert bob.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 401

    secret = api_token_issue(user=tenants.staff, staff=True)  # type: ignore[arg-type]
    staff = token_client(secret)
    assert staff.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 200
    tenants.staff.is_staff = False
    tenants.staff.save()
    assert staff.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 401
    tenants.staff.is_staff = True
    tenants.staff.save()
    assert staff.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 200
    api_token_revoke(token_id=tenants.staff.api_tokens.get().pk, actor=Actor("test", staff=True))  # type: ignore[attr-defined]
    assert staff.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 401


@pytest.mark.parametrize(
    "header", ["Token", "Token a b", "Token not-a-token", "Basic dXNlcjpwYXNz", "Bearer \xff"], ids=repr
)
def test_a_bad_authorization_is_drfs_answer(tenants: Tenants, chart_a: Chart, header: str) -> None:
    client = APIClient()
    lean = client.get(f"/api/v1/charts/{chart_a.pk}/", HTTP_AUTHORIZATION=header)
    drf = client.get(f"/api/v1/charts/{chart_a.pk}/", {"format": "json"}, HTTP_AUTHORIZATION=header)
    assert lean.status_code == drf.status_code
    assert lean.status_code in (401, 403)
    assert lean.content == drf.content


@pytest.mark.usefixtures("low_rates")
def test_the_read_rate_still_holds(
    tenants: Tenants, token_client: TokenClient, org_token: str, chart_a: Chart, chart_b: Chart
) -> None:
    """Five reads a minute: found or not, each counts once; the sixth is DRF's 429 with Retry-After."""
    client = token_client(org_token)
    statuses = [client.get(f"/api/v1/charts/{chart.pk}/").status_code for chart in (chart_a, chart_b) * 2]
    statuses.append(client.get(f"/api/v1/charts/{chart_a.pk}/").status_code)
    assert statuses == [200, 404, 200, 404, 200]
    refused = client.get(f"/api/v1/charts/{chart_a.pk}/")
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"].lower()
    # Another token has a bucket of its own.
    other = token_client(api_token_issue(user=tenants.member_a, org=tenants.org_a))  # type: ignore[arg-type]
    assert other.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 200


def test_what_the_lean_path_leaves_to_drf_still_works(
    tenants: Tenants, token_client: TokenClient, org_token: str, client_for: Callable[[Any], APIClient], chart_a: Chart
) -> None:
    """A browser session, the browsable API, HEAD, an unknown Accept, and methods the route has not."""
    session = client_for(tenants.member_a)
    assert session.get(f"/api/v1/charts/{chart_a.pk}/").json()["id"] == chart_a.pk
    assert client_for(tenants.member_b).get(f"/api/v1/charts/{chart_a.pk}/").status_code == 404
    client = token_client(org_token)
    page = client.get(f"/api/v1/charts/{chart_a.pk}/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    assert client.head(f"/api/v1/charts/{chart_a.pk}/").status_code == 200
    assert client.get(f"/api/v1/charts/{chart_a.pk}/", HTTP_ACCEPT="application/xml").status_code == 406
    indented = client.get(f"/api/v1/charts/{chart_a.pk}/", HTTP_ACCEPT="application/json; indent=2")
    assert indented.content.startswith(b'{\n  "id"')
    assert client.delete(f"/api/v1/charts/{chart_a.pk}/").status_code == 405
    assert client.get(f"/api/v1/charts/{2**63}/").status_code == 404
    assert APIClient().get(f"/api/v1/charts/{chart_a.pk}/").status_code == 401
