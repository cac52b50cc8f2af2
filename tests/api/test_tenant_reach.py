"""A tenant never reaches the operators' tier nor another org, by any write endpoint or write service.

The endpoints are read from the URL conf and the services from their modules, so a new one is driven
here without anyone remembering to: a write route without a body below, or a write service without
arguments below, fails `test_every_write_route_is_driven` / `test_every_write_service_is_driven`
until it is given them. alice (an admin of acme, no staff) acts through her session, her acme token
and, for the services, as `Actor.tenant`; after each call, beta's rows, the operators' rows (orgs,
configuration, workflows, costs, pauses, members, tokens, webhooks, histories) and the high tier are
as they were.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest
from django.test import Client as DjangoClient
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from charts import services as chart_services
from charts.levers import TENANT_PRIORITY
from charts.models import Chart, ChartEvent, ChartState, DurationStat
from common.actors import Actor
from common.errors import BulkForbidden, FieldsForbidden, Forbidden, NotFound
from feed import services as feed_services
from feed.models import WebhookDelivery, WebhookEndpoint
from knobs import services as knob_services
from knobs.models import ConfigChange, SchedulerConfig
from orgs import access
from orgs import services as org_services
from orgs.models import (
    ApiToken,
    Membership,
    Org,
    OrgChange,
    Provider,
    ProviderPause,
    ViewerZone,
    Workflow,
    WorkflowCost,
    WorkflowTurnaround,
)
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

pytestmark = pytest.mark.django_db
WRITE_METHODS = ("post", "put", "patch", "delete")
OPERATOR = Actor("user:stella", staff=True)


@dataclass
class World:
    """acme's and beta's rows that a write could name: a waiting chart each, beta's pause, webhook
    endpoint and delivery, bob's token and membership, beta's learned durations."""

    tenants: Tenants
    chart_a: Chart
    chart_b: Chart
    provider: Provider
    pause_b: ProviderPause
    endpoint_a: WebhookEndpoint
    endpoint_b: WebhookEndpoint
    delivery_a: WebhookDelivery
    delivery_b: WebhookDelivery
    token_b: ApiToken
    membership_b: Membership
    stat_b: DurationStat


@pytest.fixture
def world(tenants: Tenants) -> World:
    Membership.objects.filter(user=tenants.member_a, org=tenants.org_a).update(role=Membership.Role.ADMIN)
    ViewerZone.objects.create(user=tenants.member_b, zone="Europe/Paris")
    provider = ProviderFactory(slug="llm")
    Workflow.objects.filter(pk=tenants.workflow.pk).update(provider=provider)
    until = timezone.now() + timedelta(hours=1)
    pause_b = org_services.provider_pause(provider=provider, org=tenants.org_b, until=until, actor=OPERATOR)
    endpoints = [
        feed_services.webhook_endpoint_create(
            org=org, url="https://93.184.216.34/h", event_types=["chart.cancelled"], actor=OPERATOR
        )[0]
        for org in (tenants.org_a, tenants.org_b)
    ]
    deliveries = [
        WebhookDelivery.objects.create(
            endpoint=e, event_id="e", event_type="chart.cancelled", body="{}", idempotency_key="k"
        )
        for e in endpoints
    ]
    access.api_token_issue(user=tenants.member_b, org=tenants.org_b)
    SchedulerConfig.load()
    return World(
        tenants=tenants,
        chart_a=ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="a-1"),
        chart_b=ChartFactory(org=tenants.org_b, workflow=tenants.workflow, external_id="b-1"),
        provider=provider,
        pause_b=pause_b,
        endpoint_a=endpoints[0],
        endpoint_b=endpoints[1],
        delivery_a=deliveries[0],
        delivery_b=deliveries[1],
        token_b=ApiToken.objects.get(user=tenants.member_b),
        membership_b=Membership.objects.get(user=tenants.member_b),
        stat_b=DurationStat.objects.create(org=tenants.org_b, workflow=tenants.workflow, count=2, total_seconds=40),
    )


def untouchable() -> dict[str, list[Any]]:
    """What a tenant of acme may not change: every row but acme's own charts and their history, and
    acme's own webhooks (its admins manage them in the portal)."""
    beta_charts = Chart.objects.exclude(org__slug="acme")
    return {
        "orgs": list(Org.objects.order_by("pk").values()),
        "beta's charts": list(beta_charts.order_by("pk").values()),
        "beta's events": list(ChartEvent.objects.filter(chart__in=beta_charts).values_list("pk", flat=True)),
        "org history": list(OrgChange.objects.values_list("pk", flat=True)),
        "configuration": list(SchedulerConfig.objects.values()),
        "configuration history": list(ConfigChange.objects.values_list("pk", flat=True)),
        "workflows": list(Workflow.objects.order_by("pk").values()),
        "costs": list(WorkflowCost.objects.order_by("pk").values()),
        "turnarounds": list(WorkflowTurnaround.objects.order_by("pk").values()),
        "providers": list(Provider.objects.order_by("pk").values()),
        "pauses": list(ProviderPause.objects.order_by("pk").values()),
        "members": list(Membership.objects.order_by("pk").values()),
        "tokens": list(ApiToken.objects.order_by("pk").values_list("pk", flat=True)),
        "webhooks": list(WebhookEndpoint.objects.exclude(org__slug="acme").order_by("pk").values()),
        "deliveries": list(
            WebhookDelivery.objects.exclude(endpoint__org__slug="acme").order_by("pk").values_list("pk", flat=True)
        ),
        "learned durations": list(DurationStat.objects.order_by("pk").values()),
        "other accounts' zones": list(ViewerZone.objects.exclude(user__username="alice").order_by("pk").values()),
    }


def outside_the_tenants_tier() -> list[tuple[int, bool, int]]:
    """The charts in the operators' tier or beyond a tenant's priority range (there are none to start)."""
    low, high = TENANT_PRIORITY.minimum, TENANT_PRIORITY.maximum
    return [
        (chart.pk, chart.high_priority, chart.priority)
        for chart in Chart.objects.all()
        if chart.high_priority or not low <= chart.priority <= high
    ]


# --- Every write route of the URL conf ------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    name: str
    pattern: URLPattern
    methods: tuple[str, ...]
    # The path's arguments, the including routes' with the route's own.
    arguments: tuple[str, ...]

    @property
    def api(self) -> bool:
        """A REST route (JSON bodies, tokens accepted), not a page's form."""
        return not self.name.startswith(PAGES)

    @property
    def names_a_row(self) -> bool:
        return bool(self.arguments)


def _patterns(
    patterns: list[Any], namespace: str = "", arguments: tuple[str, ...] = ()
) -> Iterator[tuple[str, URLPattern, tuple[str, ...]]]:
    for pattern in patterns:
        groups = (*arguments, *pattern.pattern.regex.groupindex)
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _patterns(pattern.url_patterns, inner, groups)
        elif pattern.name is not None:
            yield f"{namespace}{pattern.name}", pattern, groups


def _write_methods(pattern: URLPattern) -> tuple[str, ...]:
    """The write methods a route answers: a viewset's mapped ones, an API view's, or (a Django view,
    which does not say) every one of them."""
    actions = getattr(pattern.callback, "actions", None)
    if actions is not None:
        return tuple(method for method in WRITE_METHODS if method in actions)
    view_class = getattr(pattern.callback, "cls", None) or getattr(pattern.callback, "view_class", None)
    if view_class is not None:
        return tuple(method for method in WRITE_METHODS if hasattr(view_class, method))
    return ("post",)


# Routes no tenant write can pass through, with why: Django's own pages (the admin, for staff users
# only, is checked once below; the auth views change only the caller's own session or password) and
# the API's format-suffixed twins of each route (the same view).
NOT_TENANT_WRITES = ("admin:", "login", "logout", "password_")


def write_routes() -> list[Route]:
    routes = []
    for name, pattern, arguments in _patterns(get_resolver().url_patterns):
        if name.startswith(NOT_TENANT_WRITES) or "format" in arguments:
            continue
        methods = _write_methods(pattern)
        if methods:
            routes.append(Route(name, pattern, methods, arguments))
    return routes


# The routes of pages (forms, sessions only), as opposed to the REST API's.
PAGES = ("portal", "dashboard", "metrics")
UNTIL = "2099-01-01T00:00:00Z"
# The body each write route gets, asking for as much as it could: the operators' tier, another org.
# `{org}` is the slug of the org the pass aims at.
BODIES: dict[str, dict[str, Any]] = {
    "chart-list": {"org": "{org}", "workflow": "render", "external_id": "x", "high_priority": True, "priority": 1000},
    "chart-bulk": {"org": "{org}", "items": [{"workflow": "render", "external_id": "y", "high_priority": True}]},
    "chart-cancel": {"reason": "reach"},
    "chart-pause": {"reason": "reach"},
    "chart-resume": {"reason": "reach"},
    "chart-move-to-top": {"reason": "reach"},
    "chart-prioritize": {"high_priority": True, "priority": 1000},
    "org-list": {"name": "Mine", "slug": "mine", "weight": 100},
    "org-detail": {"weight": 100, "max_concurrency": 50, "queue_limit": 50, "turnaround": 60, "turnaround_share": 1},
    "org-cost": {"cost": 1},
    "org-turnaround": {"turnaround": 60, "share": 1},
    "org-hold": {"reason": "reach"},
    "org-release": {"reason": "reach"},
    "org-member": {"role": "admin"},
    "org-members": {"user": "olga", "role": "admin"},
    "workflow-list": {"name": "mine", "workflow_type": "t", "task_queue": "q"},
    "workflow-detail": {"default_cost": 1000},
    "provider-resume": {"org": "{org}"},
    "provider-pause-list": {"provider": "llm", "org": "{org}", "until": UNTIL},
    "provider-pause-end": {},
    "token-list": {"user": "alice", "staff": True},
    "token-detail": {},
    "webhook-list": {"org": "{org}", "url": "https://93.184.216.34/x", "event_types": ["chart.cancelled"]},
    "webhook-detail": {"active": False},
    "webhook-send-again": {},
    "scheduler-config": {"budget": 999},
    "plan-preview": {"weights": {"{org}": 5}},
    "scheduler-rescue": {"org": "{org}", "apply": True, "reason": "reach"},
    "portal:submit": {"workflow": "render", "external_id": "x", "priority": "1000"},
    "portal:upload": {},
    "portal:pause": {"reason": "reach"},
    "portal:resume": {"reason": "reach"},
    "portal:cancel": {"reason": "reach", "confirmed": "yes"},
    "portal-webhooks:register": {"url": "https://93.184.216.34/x", "event_types": ["chart.cancelled"]},
    "portal-webhooks:enable": {"active": "0"},
    "portal-webhooks:send-again": {},
    "viewer-zone": {"zone": "Asia/Tokyo"},
}
# The routes that write nothing whatever the body (a POST answered as a read, or refused): no body
# needed; those that name no row may answer (a staff page's redirect to the login, the metrics).
# The routes that write the caller's own account only (no org, no row in their path): they may answer
# in either pass, and every other account's rows stay as they were (`untouchable`).
OWN_ACCOUNT = {"viewer-zone"}
READS_ON_POST = {
    "chart-status",
    "portal:home",
    "portal:org",
    "portal:org-table",
    "portal:chart",
    "portal:chart-part",
    "portal-webhooks:list",
    "portal-webhooks:log",
    "dashboard:index",
    "dashboard:partials",
    "dashboard:samples",
    "dashboard:queue",
    "metrics",
}


def _kwargs(route: Route, world: World, *, own: bool) -> dict[str, Any]:
    """Fill a route's path with acme's rows (`own`) or beta's."""
    org = world.tenants.org_a if own else world.tenants.org_b
    chart = world.chart_a if own else world.chart_b
    endpoint = world.endpoint_a if own else world.endpoint_b
    delivery = world.delivery_a if own else world.delivery_b
    kind = route.name.split(":")[-1].split("-")[0]
    by_name: dict[str, Any] = {
        "org_slug": org.slug,
        "chart_id": chart.pk,
        "endpoint_id": endpoint.pk,
        "delivery_id": delivery.pk,
        "username": world.tenants.member_a.username if own else world.tenants.member_b.username,
        "workflow": world.tenants.workflow.name,
        "name": world.tenants.workflow.name,
        "slug": world.provider.slug if kind == "provider" else org.slug,
        "pk": {
            "chart": chart.pk,
            "provider": world.pause_b.pk,
            "token": world.token_b.pk,
            "webhook": endpoint.pk,
        }.get(kind),
    }
    return {argument: by_name[argument] for argument in route.arguments}


def _url(route: Route, world: World, *, own: bool) -> str:
    return reverse(route.name, kwargs=_kwargs(route, world, own=own))


def _body(route: Route, org_slug: str) -> Any:
    def filled(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{org}", org_slug)
        if isinstance(value, dict):
            return {filled(key): filled(item) for key, item in value.items()}
        if isinstance(value, list):
            return [filled(item) for item in value]
        return value

    return filled(BODIES.get(route.name, {}))


ROUTES = write_routes()
CALLS = [
    pytest.param(route, method, how, id=f"{route.name}-{method}-{how}")
    for route in ROUTES
    for method in route.methods
    for how in (("session", "token") if route.api else ("session",))
]


def test_every_write_route_is_driven() -> None:
    """A new write route needs its body here (or a place among the reads), else it is not driven."""
    names = {route.name for route in ROUTES}
    undriven = names - BODIES.keys() - READS_ON_POST
    assert not undriven, f"give these write routes a body in BODIES: {sorted(undriven)}"
    assert not BODIES.keys() - names, "BODIES names routes that are gone"
    assert {"chart-prioritize", "org-hold", "plan-preview", "portal:submit"} <= names


@pytest.fixture
def tenant_client(world: World, client_for: Callable[[Any], APIClient], token_client: Callable[[str], APIClient]):
    def make(how: str) -> APIClient | DjangoClient:
        if how == "token":
            return token_client(access.api_token_issue(user=world.tenants.member_a, org=world.tenants.org_a))
        return client_for(world.tenants.member_a)

    return make


def _call(client: Any, method: str, url: str, body: Any, *, api: bool) -> Any:
    if api:
        return getattr(client, method)(url, body, format="json")
    return getattr(client, method)(url, body)


@pytest.mark.parametrize(("route", "method", "how"), CALLS)
def test_another_orgs_rows_are_out_of_reach(
    world: World, tenant_client: Any, route: Route, method: str, how: str
) -> None:
    client = tenant_client(how)
    before = untouchable()

    response = _call(client, method, _url(route, world, own=False), _body(route, "beta"), api=route.api)

    if route.names_a_row or route.name not in READS_ON_POST | OWN_ACCOUNT:
        assert response.status_code in (400, 403, 404, 405), (response.status_code, response.content[:300])
    assert untouchable() == before
    assert outside_the_tenants_tier() == []


@pytest.mark.parametrize(("route", "method", "how"), CALLS)
def test_the_operators_levers_are_out_of_reach_in_the_own_org(
    world: World, tenant_client: Any, route: Route, method: str, how: str
) -> None:
    client = tenant_client(how)
    before = untouchable()

    response = _call(client, method, _url(route, world, own=True), _body(route, "acme"), api=route.api)

    assert response.status_code < 500, response.content[:300]
    assert untouchable() == before
    assert outside_the_tenants_tier() == []


def test_the_admin_is_for_staff_only(world: World) -> None:
    client = DjangoClient()
    client.force_login(world.tenants.member_a)
    org_admin = reverse("admin:orgs_org_change", args=[world.tenants.org_a.pk])

    response = client.post(org_admin, {"weight": "100"})

    assert response.status_code == 302
    assert "login" in response["Location"]


# --- Every write service --------------------------------------------------------------------------

SERVICE_MODULES: tuple[ModuleType, ...] = (chart_services, org_services, knob_services, feed_services, access)
# Functions that take an actor but are not entry points, with why.
NOT_ENTRY_POINTS = {
    "org_change_log": "a history line inside the transaction of the service that checked the actor",
    "chart_submit_problems": "writes nothing: the judgement of an item whose org the caller could not name",
}


def write_services() -> dict[str, Callable[..., Any]]:
    return {
        name: function
        for module in SERVICE_MODULES
        for name, function in vars(module).items()
        if inspect.isfunction(function)
        and function.__module__ == module.__name__
        and not name.startswith("_")
        and "actor" in inspect.signature(function).parameters
        and name not in NOT_ENTRY_POINTS
    }


def _future() -> Any:
    return timezone.now() + timedelta(hours=2)


# Each service's arguments against beta's rows (or, for the operators' levers, acme's own); the
# expected refusal follows: NotFound for another org's row, Forbidden for an operators' lever.
SERVICE_CALLS: dict[str, Callable[[World], dict[str, Any]]] = {
    "chart_submit": lambda w: {"org": w.tenants.org_b, "workflow": "render", "external_id": "x"},
    "chart_submit_bulk": lambda w: {"org": w.tenants.org_b, "items": [chart_services.ChartRequest("render", "y")]},
    "chart_pause": lambda w: {"chart": w.chart_b},
    "chart_resume": lambda w: {"chart": w.chart_b},
    "chart_prioritize": lambda w: {"chart": w.chart_b, "priority": 1},
    "chart_move_to_top": lambda w: {"chart": w.chart_b},
    "chart_cancel": lambda w: {"chart": w.chart_b},
    "chart_workflow_closed": lambda w: {"chart": w.chart_a, "how": "cancelled"},
    "duration_stats_forget": lambda w: {"stats": [w.stat_b]},
    "org_create": lambda w: {"name": "Mine"},
    "org_weight_set": lambda w: {"org": w.tenants.org_a, "weight": 100},
    "org_hold": lambda w: {"org": w.tenants.org_b},
    "org_release": lambda w: {"org": w.tenants.org_a},
    "org_cap_set": lambda w: {"org": w.tenants.org_a, "max_concurrency": None},
    "org_queue_limit_set": lambda w: {"org": w.tenants.org_a, "queue_limit": None},
    "workflow_cost_set": lambda w: {"org": w.tenants.org_a, "workflow": w.tenants.workflow, "cost": 1},
    "org_turnaround_set": lambda w: {"org": w.tenants.org_a, "turnaround": 60},
    "org_turnaround_share_set": lambda w: {"org": w.tenants.org_a, "share": 0.9},
    "workflow_turnaround_set": lambda w: {"org": w.tenants.org_a, "workflow": w.tenants.workflow, "turnaround": 60},
    "workflow_register": lambda w: {"name": "mine", "workflow_type": "t", "task_queue": "q"},
    "workflow_change": lambda w: {"workflow": w.tenants.workflow, "default_cost": 1000},
    "membership_create": lambda w: {"user": w.tenants.outsider, "org": w.tenants.org_a, "role": "admin"},
    "membership_role_set": lambda w: {"membership": w.membership_b, "role": "viewer"},
    "membership_remove": lambda w: {"membership": w.membership_b},
    "provider_pause": lambda w: {"provider": w.provider, "org": w.tenants.org_a, "until": _future()},
    "provider_throttle_record": lambda w: {"provider": w.provider, "org": w.tenants.org_b, "until": _future()},
    "provider_resume": lambda w: {"provider": w.provider, "org": w.tenants.org_b},
    "budget_set": lambda w: {"budget": 999},
    "policy_set": lambda w: {"policy": "deficit"},
    "scheduler_config_set": lambda w: {"budget": 999},
    "webhook_endpoint_create": lambda w: {"org": None, "url": "https://93.184.216.34/x", "event_types": []},
    "webhook_endpoint_update": lambda w: {"endpoint": w.endpoint_b, "active": False},
    "webhook_endpoint_delete": lambda w: {"endpoint": w.endpoint_b},
    "webhook_delivery_send_again": lambda w: {"endpoint": w.endpoint_b, "delivery_id": w.delivery_b.pk},
    "api_token_grant": lambda w: {"user": w.tenants.member_a, "org": None, "staff": True, "name": "mine"},
    "api_token_revoke": lambda w: {"token_id": w.token_b.pk},
}


def test_every_write_service_is_driven() -> None:
    """A new write service needs its arguments here (or a reason among NOT_ENTRY_POINTS)."""
    services = write_services()
    assert not services.keys() - SERVICE_CALLS.keys(), (
        f"give these services arguments: {sorted(services.keys() - SERVICE_CALLS.keys())}"
    )
    assert not SERVICE_CALLS.keys() - services.keys(), "SERVICE_CALLS names services that are gone"


@pytest.mark.parametrize("name", sorted(SERVICE_CALLS))
def test_a_tenant_actor_is_refused_by_every_service(world: World, name: str) -> None:
    alice = Actor.tenant(world.tenants.member_a, [world.tenants.org_a.pk])
    before = untouchable()

    with pytest.raises((Forbidden, NotFound)):
        write_services()[name](**SERVICE_CALLS[name](world), actor=alice)

    assert untouchable() == before
    assert outside_the_tenants_tier() == []


@pytest.mark.parametrize(
    "call",
    [
        lambda w, a: chart_services.chart_submit(
            org=w.tenants.org_a, workflow="render", external_id="h", high_priority=True, actor=a
        ),
        lambda w, a: chart_services.chart_submit(
            org=w.tenants.org_a, workflow="render", external_id="p", priority=11, actor=a
        ),
        lambda w, a: chart_services.chart_submit_bulk(
            org=w.tenants.org_a, items=[chart_services.ChartRequest("render", "b", high_priority=True)], actor=a
        ),
        lambda w, a: chart_services.chart_prioritize(chart=w.chart_a, high_priority=True, actor=a),
        lambda w, a: chart_services.chart_prioritize(chart=w.chart_a, priority=-11, actor=a),
    ],
    ids=["submit-high", "submit-beyond", "bulk-high", "prioritize-high", "prioritize-beyond"],
)
def test_a_tenant_actor_cannot_reach_the_operators_tier_in_its_own_org(world: World, call: Any) -> None:
    alice = Actor.tenant(world.tenants.member_a, [world.tenants.org_a.pk])

    with pytest.raises((Forbidden, FieldsForbidden, BulkForbidden)):  # each a 403 naming the field
        call(world, alice)

    assert outside_the_tenants_tier() == []
    assert not Chart.objects.exclude(pk__in=[world.chart_a.pk, world.chart_b.pk]).exists()


def test_a_tenant_actors_move_to_top_stops_at_its_range(world: World) -> None:
    ChartFactory(org=world.tenants.org_a, workflow=world.tenants.workflow, priority=TENANT_PRIORITY.maximum)
    alice = Actor.tenant(world.tenants.member_a, [world.tenants.org_a.pk])

    chart = chart_services.chart_move_to_top(chart=world.chart_a, actor=alice)

    assert chart.priority == TENANT_PRIORITY.maximum
    assert outside_the_tenants_tier() == []
    operator_moved = chart_services.chart_move_to_top(chart=world.chart_a, actor=OPERATOR)
    assert operator_moved.priority > TENANT_PRIORITY.maximum
    assert Chart.objects.get(pk=world.chart_a.pk).state == ChartState.QUEUED
