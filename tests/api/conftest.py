"""API fixtures: a client per tenant, tokens, and charts written as the replan would leave them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from charts.models import Chart
from common import events
from orgs.access import CallerReadThrottle, CallerWriteThrottle, api_token_issue
from tests.conftest import Tenants
from tests.factories import ChartFactory


@pytest.fixture(autouse=True)
def quiet_announcements(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replan loop and the live pages are others' business here; changes need only commit."""
    monkeypatch.setattr(events, "request_replan", lambda: None)
    monkeypatch.setattr(events, "broadcast", lambda group, message: None)


@pytest.fixture
def client_for(tenants: Tenants) -> Callable[[Any], APIClient]:
    """A logged-in browser session for a user (None: anonymous)."""

    def make(user: Any) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture
def token_client() -> Callable[[str], APIClient]:
    def make(secret: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        return client

    return make


@pytest.fixture
def org_token(tenants: Tenants) -> str:
    """alice's token for acme."""
    return api_token_issue(user=tenants.member_a, org=tenants.org_a)  # type: ignore[arg-type]


@pytest.fixture
def staff_token(tenants: Tenants) -> str:
    return api_token_issue(user=tenants.staff, staff=True)  # type: ignore[arg-type]


@pytest.fixture
def chart_a(tenants: Tenants) -> Chart:
    return ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="a-1", position=0)


@pytest.fixture
def chart_b(tenants: Tenants) -> Chart:
    return ChartFactory(org=tenants.org_b, workflow=tenants.workflow, external_id="b-1", position=1)


@pytest.fixture
def low_rates(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """Three writes and five reads a minute. The counts live in Redis, which outlives the test
    database: a run started within a minute of another reuses its token and user ids, so each test
    counts under a key prefix of its own."""
    default = settings.CACHES["default"]
    settings.CACHES = {**settings.CACHES, "default": {**default, "KEY_PREFIX": f"throttle-test-{uuid.uuid4().hex}"}}
    rates = {"read": "5/min", "write": "3/min"}
    monkeypatch.setattr(CallerReadThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(CallerWriteThrottle, "THROTTLE_RATES", rates)
