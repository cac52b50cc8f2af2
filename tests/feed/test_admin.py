"""Webhooks in the admin: registered through the service (URL checked, secret shown once), the delivery
log with its attempts, send again."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from feed.models import WebhookDelivery, WebhookEndpoint
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(tenants: Tenants) -> Client:
    client = Client()
    client.force_login(tenants.staff)
    return client


def test_staff_register_an_endpoint_in_the_admin_and_see_the_secret_once(tenants: Tenants, staff: Client) -> None:
    page = staff.post(
        "/admin/feed/webhookendpoint/add/",
        {"org": tenants.org_a.pk, "url": "https://93.184.216.34/hook", "event_types": ["chart.failed"]},
        follow=True,
    )
    assert page.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    assert (endpoint.org, endpoint.event_types, endpoint.created_by) == (tenants.org_a, ["chart.failed"], "user:stella")
    assert endpoint.secret in page.content.decode()
    assert endpoint.secret not in staff.get(f"/admin/feed/webhookendpoint/{endpoint.pk}/change/").content.decode()


def test_a_private_url_is_refused_in_the_admin(tenants: Tenants, staff: Client) -> None:
    page = staff.post(
        "/admin/feed/webhookendpoint/add/",
        {"org": tenants.org_a.pk, "url": "https://10.0.0.1/hook", "event_types": ["chart.failed"]},
        follow=True,
    )
    assert "non-public address" in page.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_the_delivery_log_and_send_again(tenants: Tenants, staff: Client) -> None:
    endpoint = WebhookEndpoint.objects.create(org=tenants.org_a, url="https://93.184.216.34/x", secret="s", cursor="")
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event_id="e1", event_type="chart.failed", body="{}", idempotency_key="1:e1"
    )
    delivery.attempts.create(number=1, status=502, latency_ms=30, response_excerpt="bad gateway")
    page = staff.get(f"/admin/feed/webhookdelivery/{delivery.pk}/change/").content.decode()
    assert "bad gateway" in page
    data: dict[str, Any] = {"action": "send_again", "_selected_action": [delivery.pk]}
    staff.post("/admin/feed/webhookdelivery/", data, follow=True)
    assert list(WebhookDelivery.objects.values_list("idempotency_key", flat=True)) == ["1:e1", "1:e1"]
