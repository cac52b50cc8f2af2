"""The promise knobs of the scheduler's configuration (at-risk threshold, due first, the rescue's
bounds): set through the service, the API (ETag, history, a 400 naming the field) and the admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from common.actors import Actor
from common.errors import InvalidInput
from knobs import levers, services
from knobs.models import ConfigChange, SchedulerConfig
from tests.admin_helpers import change_form_data, messages_of
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db

ACTOR = Actor("user:stella", staff=True)
URL = "/api/v1/scheduler/config/"


def changes() -> list[tuple[str, str, str, str, str]]:
    return [(c.actor, c.field, c.old_value, c.new_value, c.reason) for c in ConfigChange.objects.order_by("field")]


@pytest.fixture
def staff_api(tenants: Tenants) -> APIClient:
    client = APIClient()
    client.force_login(tenants.staff)
    return client


def test_the_defaults() -> None:
    config = SchedulerConfig.load()
    assert (config.at_risk_threshold, config.due_first, config.rescue_max_budget, config.rescue_max_weight) == (
        0.5, False, None, 10,
    )  # fmt: skip


def test_the_api_reads_and_sets_them_with_a_reason(staff_api: APIClient) -> None:
    read = staff_api.get(URL).json()
    assert {k: read[k] for k in ("at_risk_threshold", "due_first", "rescue_max_budget", "rescue_max_weight")} == {
        "at_risk_threshold": 0.5, "due_first": False, "rescue_max_budget": None, "rescue_max_weight": 10,
    }  # fmt: skip
    body = {"at_risk_threshold": 0.8, "due_first": True, "rescue_max_budget": 40, "rescue_max_weight": 20}

    response = staff_api.patch(URL, {**body, "reason": "promises"}, format="json")

    assert response.status_code == 200, response.json()
    assert {k: response.json()[k] for k in body} == body
    assert changes() == [
        ("user:stella", "at_risk_threshold", "0.5", "0.8", "promises"),
        ("user:stella", "due_first", "False", "True", "promises"),
        ("user:stella", "rescue_max_budget", "None", "40", "promises"),
        ("user:stella", "rescue_max_weight", "10", "20", "promises"),
    ]
    assert staff_api.patch(URL, {"rescue_max_budget": None}, format="json").json()["rescue_max_budget"] is None


def test_the_etag_covers_them(staff_api: APIClient) -> None:
    opened = staff_api.get(URL)["ETag"]
    services.scheduler_config_set(actor=Actor("user:oscar", staff=True), due_first=True)

    stale = staff_api.patch(URL, {"at_risk_threshold": 0.9}, format="json", HTTP_IF_MATCH=opened)

    assert stale.status_code == 412
    assert SchedulerConfig.load().at_risk_threshold == 0.5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"at_risk_threshold": 0}, "at_risk_threshold"),
        ({"at_risk_threshold": 1.01}, "at_risk_threshold"),
        ({"at_risk_threshold": -1}, "at_risk_threshold"),
        ({"at_risk_threshold": "0.5"}, "at_risk_threshold"),
        ({"due_first": "yes"}, "due_first"),
        ({"due_first": 1}, "due_first"),
        ({"rescue_max_budget": 0}, "rescue_max_budget"),
        ({"rescue_max_budget": levers.BUDGET.maximum + 1}, "rescue_max_budget"),
        ({"rescue_max_budget": "9"}, "rescue_max_budget"),
        ({"rescue_max_weight": 0}, "rescue_max_weight"),
        ({"rescue_max_weight": 10**20}, "rescue_max_weight"),
        ({"rescue_max_weight": None}, "rescue_max_weight"),
    ],
)
def test_a_bad_value_is_a_400_naming_the_field(staff_api: APIClient, body: dict[str, Any], field: str) -> None:
    response = staff_api.patch(URL, body, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {field}
    assert not ConfigChange.objects.exists()


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"at_risk_threshold": 0.0}, "at_risk_threshold"),
        ({"at_risk_threshold": float("nan")}, "at_risk_threshold"),
        ({"due_first": None}, "due_first"),
        ({"rescue_max_budget": -3}, "rescue_max_budget"),
        ({"rescue_max_weight": 2.5}, "rescue_max_weight"),
    ],
)
def test_the_service_refuses_them_too(values: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        services.scheduler_config_set(actor=ACTOR, **values)
    assert error.value.field == field


def test_a_tenant_cannot_set_them(tenants: Tenants) -> None:
    client = APIClient()
    client.force_login(tenants.member_a)

    assert client.patch(URL, {"due_first": True}, format="json").status_code == 403
    with pytest.raises(Exception, match="operators"):
        services.scheduler_config_set(actor=Actor.tenant(tenants.member_a, [tenants.org_a.pk]), due_first=True)
    assert SchedulerConfig.load().due_first is False


def test_the_admin_sets_them_through_the_service(client: Client, tenants: Tenants) -> None:
    client.force_login(tenants.staff)
    url = reverse("admin:knobs_schedulerconfig_change", args=[SchedulerConfig.load().pk])
    data = change_form_data(client.get(url))
    data.update(at_risk_threshold="0.7", due_first="on", rescue_max_budget="30", reason="promises")

    assert client.post(url, data).status_code == 302

    config = SchedulerConfig.load()
    assert (config.at_risk_threshold, config.due_first, config.rescue_max_budget) == (0.7, True, 30)
    assert {field for _, field, _, _, _ in changes()} == {"at_risk_threshold", "due_first", "rescue_max_budget"}

    data = change_form_data(client.get(url))
    data.update(at_risk_threshold="1.5")
    refused = client.post(url, data, follow=True)
    assert not any("successfully" in message for message in messages_of(refused))
    assert SchedulerConfig.load().at_risk_threshold == 0.7
