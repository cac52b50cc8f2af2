"""The portal's webhook pages: an org's admin registers, reads the log, sends again, is told of a
disabled endpoint; a member who is not admin is refused; another org's endpoint is a 404."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from feed.models import WebhookDelivery, WebhookEndpoint
from orgs.models import Membership
from tests.conftest import Tenants
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_a(tenants: Tenants) -> Client:
    user = UserFactory(username="ada")
    Membership.objects.create(user=user, org=tenants.org_a, role=Membership.Role.ADMIN)
    client = Client()
    client.force_login(user)
    return client


def endpoint_of(org: Any, **fields: Any) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        org=org, url="https://93.184.216.34/hook", event_types=["chart.failed"], secret="s", cursor="", **fields
    )


def test_an_admin_registers_an_endpoint_and_sees_the_secret_once(tenants: Tenants, admin_a: Client) -> None:
    page = admin_a.post(
        "/portal/acme/webhooks/register/",
        {"url": "https://93.184.216.34/hook", "event_types": ["chart.failed", "org.held"]},
    )
    assert page.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.org == tenants.org_a
    assert endpoint.event_types == ["chart.failed", "org.held"]
    assert endpoint.secret in page.content.decode()
    listed = admin_a.get("/portal/acme/webhooks/").content.decode()
    assert "https://93.184.216.34/hook" in listed
    assert endpoint.secret not in listed


@pytest.mark.parametrize(
    ("form", "problem"),
    [
        ({"url": "https://127.0.0.1/hook", "event_types": ["chart.failed"]}, "url: "),
        ({"url": "https://93.184.216.34/hook"}, "event_types: "),
        ({"url": "https://93.184.216.34/hook", "event_types": ["chart.at_risk"]}, "event_types: "),
    ],
)
def test_a_bad_registration_is_refused_naming_the_field(admin_a: Client, form: dict[str, Any], problem: str) -> None:
    page = admin_a.post("/portal/acme/webhooks/register/", form)
    assert page.status_code == 400
    assert problem in page.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_a_member_who_is_not_admin_is_refused_and_another_org_is_not_found(tenants: Tenants, admin_a: Client) -> None:
    alice = Client()
    alice.force_login(tenants.member_a)
    assert alice.get("/portal/acme/webhooks/").status_code == 403
    assert alice.post("/portal/acme/webhooks/register/", {"url": "https://93.184.216.34/x"}).status_code == 403
    assert not WebhookEndpoint.objects.exists()
    theirs = endpoint_of(tenants.org_b)
    delivery = WebhookDelivery.objects.create(
        endpoint=theirs, event_id="e", event_type="chart.failed", body="{}", idempotency_key="k"
    )
    assert admin_a.get("/portal/beta/webhooks/").status_code == 404
    assert admin_a.get(f"/portal/acme/webhooks/{theirs.pk}/").status_code == 404
    mine = endpoint_of(tenants.org_a)
    sent = admin_a.post(f"/portal/acme/webhooks/{mine.pk}/deliveries/{delivery.pk}/send-again/")
    assert sent.status_code == 404
    assert WebhookDelivery.objects.count() == 1


def test_the_log_shows_attempts_and_sends_again(tenants: Tenants, admin_a: Client) -> None:
    endpoint = endpoint_of(tenants.org_a)
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event_id="e1", event_type="chart.failed", body="{}", idempotency_key="7:e1"
    )
    delivery.attempts.create(number=1, status=500, latency_ms=12, response_excerpt="boom")
    log = admin_a.get(f"/portal/acme/webhooks/{endpoint.pk}/").content.decode()
    assert "500 in 12 ms" in log
    assert "7:e1" in log
    answer = admin_a.post(f"/portal/acme/webhooks/{endpoint.pk}/deliveries/{delivery.pk}/send-again/")
    assert answer.status_code == 302
    assert list(WebhookDelivery.objects.values_list("idempotency_key", flat=True)) == ["7:e1", "7:e1"]


def test_the_org_is_told_of_an_endpoint_disabled_after_failing(tenants: Tenants, admin_a: Client) -> None:
    now = timezone.now()
    endpoint_of(
        tenants.org_a, active=False, failing_since=now, disabled_at=now, disabled_reason="failing since yesterday"
    )
    assert "failing since yesterday" in admin_a.get("/portal/acme/webhooks/").content.decode()
    assert "was disabled after failing for a day" in admin_a.get("/portal/acme/").content.decode()
    bob = Client()
    bob.force_login(tenants.member_b)
    assert "was disabled" not in bob.get("/portal/beta/").content.decode()


def test_the_webhook_pages_times_are_times_to_the_second(tenants: Tenants, admin_a: Client) -> None:
    at = datetime(2026, 3, 1, 23, 59, 58, tzinfo=UTC)
    endpoint_of(tenants.org_a, active=False, failing_since=at, disabled_at=at, disabled_reason="failing")
    endpoint_of(tenants.org_a, failing_since=at)
    page = admin_a.get("/portal/acme/webhooks/").content.decode()
    shown = '<time datetime="2026-03-01T23:59:58+00:00">2026-03-01 23:59:58 UTC</time>'
    assert f"is disabled since {shown}" in page
    assert f"failing since {shown}" in page
