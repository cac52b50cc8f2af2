"""Each lever's bound is written once (`common.bounds`, beside its service) and every surface keeps
it: the service, the API, the what-if preview and the admin refuse one past it with an error naming
the field, write nothing, and take the bound itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from charts.models import Chart, ChartState
from charts.services import PRIORITY, chart_submit
from common.actors import Actor
from common.bounds import Whole
from common.errors import InvalidInput
from knobs.levers import AGING_CAP, BUDGET, MAX_ATTEMPTS
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs import services as org_services
from orgs.levers import COST, MAX_CONCURRENCY, QUEUE_LIMIT, WEIGHT
from orgs.models import Org, WorkflowCost
from tests.admin_helpers import change_form_data
from tests.conftest import Tenants
from tests.factories import ChartFactory

pytestmark = pytest.mark.django_db
ACTOR = Actor("user:test", staff=True)
PREVIEW = "/api/v1/scheduler/plan-preview/"


@pytest.fixture
def staff(client_for: Callable[[Any], APIClient], tenants: Tenants) -> APIClient:
    SchedulerConfig.load()
    return client_for(tenants.staff)


def refused(response: Any, field: str) -> None:
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


def org_levers() -> tuple[Any, ...]:
    return tuple(Org.objects.order_by("pk").values_list("weight", "max_concurrency", "queue_limit"))


# lever, its bound, the org field the API's PATCH takes, the what-if's key.
ORG_LEVERS = [
    ("weight", WEIGHT, "weights"),
    ("max_concurrency", MAX_CONCURRENCY, "caps"),
    ("queue_limit", QUEUE_LIMIT, "queue_limits"),
]
SETTERS: dict[str, Callable[..., Any]] = {
    "weight": lambda org, value: org_services.org_weight_set(org=org, weight=value, actor=ACTOR),
    "max_concurrency": lambda org, value: org_services.org_cap_set(org=org, max_concurrency=value, actor=ACTOR),
    "queue_limit": lambda org, value: org_services.org_queue_limit_set(org=org, queue_limit=value, actor=ACTOR),
}


@pytest.mark.parametrize(("field", "bound", "what_if"), ORG_LEVERS, ids=[row[0] for row in ORG_LEVERS])
def test_an_org_lever_past_its_bound_is_refused_everywhere(
    staff: APIClient, tenants: Tenants, field: str, bound: Whole, what_if: str
) -> None:
    before = org_levers()
    with pytest.raises(InvalidInput) as error:
        SETTERS[field](tenants.org_a, bound.maximum + 1)
    assert error.value.field == field
    refused(staff.patch("/api/v1/orgs/acme/", {field: bound.maximum + 1}, format="json"), field)
    refused(staff.post(PREVIEW, {what_if: {"acme": bound.maximum + 1}}, format="json"), what_if)
    refused(staff.post(PREVIEW, {what_if: {"acme": bound.minimum - 1}}, format="json"), what_if)
    assert org_levers() == before


@pytest.mark.parametrize(("field", "bound", "what_if"), ORG_LEVERS, ids=[row[0] for row in ORG_LEVERS])
def test_an_org_lever_at_its_bound_is_taken_everywhere(
    staff: APIClient, tenants: Tenants, field: str, bound: Whole, what_if: str
) -> None:
    assert staff.post(PREVIEW, {what_if: {"acme": bound.maximum}}, format="json").status_code == 200
    response = staff.patch("/api/v1/orgs/acme/", {field: bound.maximum}, format="json")
    assert response.status_code == 200, response.json()
    assert getattr(Org.objects.get(pk=tenants.org_a.pk), field) == bound.maximum


@pytest.mark.parametrize("field", ["weight", "max_concurrency", "queue_limit"])
def test_the_admin_form_keeps_the_org_bounds(tenants: Tenants, field: str) -> None:
    bound = {"weight": WEIGHT, "max_concurrency": MAX_CONCURRENCY, "queue_limit": QUEUE_LIMIT}[field]
    browser = Client()
    browser.force_login(tenants.staff)
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    before = org_levers()
    for value in (bound.minimum - 1, bound.maximum + 1):
        data = change_form_data(browser.get(url))
        data[field] = str(value)
        response = browser.post(url, data)
        assert response.status_code == 200  # the form again, with the error on the field
        assert field in response.context["adminform"].form.errors
    assert org_levers() == before


def test_a_cost_past_its_bound_is_refused_everywhere(staff: APIClient, tenants: Tenants) -> None:
    with pytest.raises(InvalidInput) as error:
        org_services.workflow_cost_set(org=tenants.org_a, workflow=tenants.workflow, cost=COST.maximum + 1, actor=ACTOR)
    assert error.value.field == "cost"
    refused(staff.put("/api/v1/orgs/acme/costs/render/", {"cost": COST.maximum + 1}, format="json"), "cost")
    refused(staff.patch("/api/v1/workflows/render/", {"default_cost": COST.maximum + 1}, format="json"), "default_cost")
    over = {"costs": [{"org": "acme", "workflow": "render", "cost": COST.maximum + 1}]}
    refused(staff.post(PREVIEW, over, format="json"), "costs")
    assert not WorkflowCost.objects.exists()
    at = {"costs": [{"org": "acme", "workflow": "render", "cost": COST.maximum}]}
    assert staff.post(PREVIEW, at, format="json").status_code == 200
    assert staff.put("/api/v1/orgs/acme/costs/render/", {"cost": COST.maximum}, format="json").status_code == 200


def test_a_priority_past_its_bound_is_refused_everywhere(staff: APIClient, tenants: Tenants) -> None:
    with pytest.raises(InvalidInput) as error:
        chart_submit(org=tenants.org_a, workflow="render", external_id="x", priority=PRIORITY.maximum + 1, actor=ACTOR)
    assert error.value.field == "priority"
    body = {"org": "acme", "workflow": "render", "external_id": "x", "priority": PRIORITY.maximum + 1}
    refused(staff.post("/api/v1/charts/", body, format="json"), "priority")
    assert not Chart.objects.exists()
    waiting = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.QUEUED)
    change = {"priorities": [{"chart": waiting.pk, "priority": PRIORITY.maximum + 1}]}
    refused(staff.post(PREVIEW, change, format="json"), "priorities")
    change = {"priorities": [{"chart": waiting.pk, "priority": PRIORITY.minimum}]}
    assert staff.post(PREVIEW, change, format="json").status_code == 200


@pytest.mark.parametrize(
    ("field", "bound", "previewed"),
    [("budget", BUDGET, True), ("aging_cap", AGING_CAP, True), ("max_attempts", MAX_ATTEMPTS, False)],
)
def test_a_setting_past_its_bound_is_refused_everywhere(
    staff: APIClient, field: str, bound: Whole, previewed: bool
) -> None:
    before = SchedulerConfig.load()
    for value in (bound.minimum - 1, bound.maximum + 1):
        with pytest.raises(InvalidInput) as error:
            scheduler_config_set(actor=ACTOR, **{field: value})
        assert error.value.field == field
        refused(staff.patch("/api/v1/scheduler/config/", {field: value}, format="json"), field)
        if previewed:
            refused(staff.post(PREVIEW, {field: value}, format="json"), field)
    assert getattr(SchedulerConfig.load(), field) == getattr(before, field)
    assert staff.patch("/api/v1/scheduler/config/", {field: bound.maximum}, format="json").status_code == 200
    assert getattr(SchedulerConfig.load(), field) == bound.maximum
