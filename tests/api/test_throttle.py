"""Rate limits per caller: a token over its rate gets 429 with Retry-After, and nobody else does."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from charts.models import Chart
from fairsched.settings import env_rate
from orgs.access import api_token_issue
from tests.conftest import Tenants


def submit(client: APIClient, external_id: str) -> int:
    body = {"workflow": "render", "external_id": external_id}
    return client.post("/api/v1/charts/", body, format="json").status_code


@pytest.mark.usefixtures("low_rates")
def test_a_token_over_its_write_rate_gets_429_with_retry_after(
    tenants: Tenants, org_token: str, token_client: Callable[[str], APIClient]
) -> None:
    client = token_client(org_token)
    assert [submit(client, f"j{i}") for i in range(3)] == [201, 201, 201]
    refused = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "j3"}, format="json")
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"].lower()
    # Nothing of the refused request was written; reads have their own bucket.
    assert not Chart.objects.filter(external_id="j3").exists()
    assert client.get("/api/v1/charts/").status_code == 200


@pytest.mark.usefixtures("low_rates")
def test_one_callers_limit_is_nobody_elses(
    tenants: Tenants, org_token: str, token_client: Callable[[str], APIClient]
) -> None:
    noisy = token_client(org_token)
    for i in range(3):
        submit(noisy, f"n{i}")
    assert submit(noisy, "n3") == 429
    # Another tenant's token, and another token of the same user, each have a bucket of their own.
    other = token_client(api_token_issue(user=tenants.member_b, org=tenants.org_b))  # type: ignore[arg-type]
    second = token_client(api_token_issue(user=tenants.member_a, org=tenants.org_a))  # type: ignore[arg-type]
    assert submit(other, "o0") == 201
    assert submit(second, "s0") == 201


@pytest.mark.usefixtures("low_rates")
def test_a_browser_session_is_limited_per_user(tenants: Tenants, client_for: Callable[..., APIClient]) -> None:
    client = client_for(tenants.member_a)
    statuses = [client.get("/api/v1/charts/").status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]


def test_rates_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSCHED_API_WRITE_RATE", "20/s")
    assert env_rate("FAIRSCHED_API_WRITE_RATE", "600/min") == "20/s"
    monkeypatch.setenv("FAIRSCHED_API_WRITE_RATE", "off")
    assert env_rate("FAIRSCHED_API_WRITE_RATE", "600/min") is None
    monkeypatch.delenv("FAIRSCHED_API_WRITE_RATE")
    assert env_rate("FAIRSCHED_API_WRITE_RATE", "600/min") == "600/min"


@pytest.mark.parametrize("value", ["fast", "-1/min", "0/min", "10/week", "10/month", "10"])
def test_a_bad_rate_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("FAIRSCHED_API_READ_RATE", value)
    with pytest.raises(ImproperlyConfigured, match="FAIRSCHED_API_READ_RATE"):
        env_rate("FAIRSCHED_API_READ_RATE", "6000/min")
