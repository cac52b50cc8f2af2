"""The operators' dashboard: one staff-only page, the JSON it refetches, and its levers.

Reads go through `scheduling.selectors`; every lever parses its input, calls exactly one service with
the operator as actor, and answers `{"ok": true}` or 400/404/409 with `{field: [message]}`. The
services announce their change after commit (`common.events.changed`), which is what makes every
open dashboard refetch; a lever's response carries no state of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.contrib.auth.views import redirect_to_login
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from charts import services as chart_services
from charts.models import Chart
from common import strict
from common.actors import actor_for
from common.errors import InvalidInput, NotFound, ServiceError
from orgs import services as org_services
from orgs.models import Org, Provider, Workflow
from scheduling import selectors
from scheduling import services as scheduling_services

M = TypeVar("M", bound=Model)

PARTS: dict[str, Callable[..., Any]] = {
    "summary": selectors.summary,
    "orgs": selectors.org_rows,
    "inflight": selectors.in_flight,
    "outside": selectors.outside_plan,
    "events": selectors.recent_events,
    "samples": selectors.queue_samples,
    "meta": selectors.workflows_and_providers,
}
# Parts made of the per-(org, state) aggregate, which is computed once for all of them.
LOAD_PARTS = {"summary", "orgs"}
QUEUE_PAGE = 100


def _is_staff(request: HttpRequest) -> bool:
    return bool(request.user.is_authenticated and request.user.is_active and request.user.is_staff)


def _refused() -> JsonResponse:
    return JsonResponse({"detail": ["staff only"]}, status=403)


def _error(error: ServiceError) -> JsonResponse:
    return JsonResponse(error.as_dict(), status=error.status)


def staff_json(view: Callable[..., JsonResponse]) -> Callable[..., JsonResponse]:
    """JSON endpoints answer 403 to anyone but active staff (no login redirect for a fetch)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        if not _is_staff(request):
            return _refused()
        return view(request, *args, **kwargs)

    return wrapper


@never_cache
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """The page, with its whole first state inlined so that the first paint needs no second request."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), login_url=reverse("admin:login"))
    if not _is_staff(request):
        return HttpResponse("The dashboard is for staff.", status=403, content_type="text/plain")
    initial = _parts(list(PARTS))
    initial["queue"] = selectors.queue_page(limit=QUEUE_PAGE)
    return render(request, "dashboard/index.html", {"initial": initial})


@never_cache
@require_GET
@staff_json
def state(request: HttpRequest) -> JsonResponse:
    """The parts a client asks for (`?parts=summary,orgs`), all of them by default."""
    wanted = [name for name in request.GET.get("parts", ",".join(PARTS)).split(",") if name]
    unknown = sorted(set(wanted) - set(PARTS))
    if unknown:
        return JsonResponse({"parts": [f"unknown part(s): {', '.join(unknown)}"]}, status=400)
    return JsonResponse(_parts(wanted))


def _parts(names: list[str]) -> dict[str, Any]:
    load = selectors.active_load() if len(LOAD_PARTS.intersection(names)) > 1 else None
    return {
        name: PARTS[name](load=load) if name in LOAD_PARTS and load is not None else PARTS[name]() for name in names
    }


@never_cache
@require_GET
@staff_json
def queue(request: HttpRequest) -> JsonResponse:
    """A page of the queue in fair order: `?start=<position>` or `?org=<slug>&offset=<n>`; `limit` <= 500."""
    try:
        start = _query_int(request, "start", 0)
        offset = _query_int(request, "offset", 0)
        limit = _query_int(request, "limit", QUEUE_PAGE)
        org = _org(request.GET["org"]) if request.GET.get("org") else None
    except ServiceError as error:
        return _error(error)
    return JsonResponse(selectors.queue_page(start=start, org=org, offset=offset, limit=limit))


def _query_int(request: HttpRequest, name: str, default: int) -> int:
    raw = request.GET.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, got {raw!r}", field=name) from None
    if value < 0:
        raise InvalidInput(f"{name} must be >= 0, got {value}", field=name)
    return value


# Levers -------------------------------------------------------------------------------------------

Lever = Callable[..., Any]


def lever(action: Lever) -> Callable[..., JsonResponse]:
    """POST, staff only, CSRF-checked (the middleware), JSON object body; one service call."""

    @wraps(action)
    @require_POST
    def view(request: HttpRequest, **kwargs: Any) -> JsonResponse:
        if not _is_staff(request):
            return _refused()
        try:
            body = strict.loads(request.body or b"{}")
        except strict.BadInput as error:
            return JsonResponse(error.as_dict(), status=400)
        if not isinstance(body, dict):
            return JsonResponse({"detail": ["the body must be a JSON object"]}, status=400)
        try:
            result = action(body, actor_for(request.user), **kwargs)
        except ServiceError as error:
            return _error(error)
        return JsonResponse({"ok": True, **(result or {})})

    return view


def _required(body: dict[str, Any], name: str) -> Any:
    if name not in body:
        raise InvalidInput(f"{name} is required", field=name)
    return body[name]


def _one(model: type[M], field: str, value: object, **lookup: object) -> M:
    """The row `lookup` names, or a 404 naming the field (an empty value names nothing)."""
    found = model._default_manager.filter(**lookup).first() if value not in (None, "") else None
    if found is None:
        raise NotFound(f"no {field} {value!r}", field=field)
    return found


def _org(slug: object) -> Org:
    return _one(Org, "org", slug, slug=str(slug))


def _chart(pk: int) -> Chart:
    return _one(Chart, "chart", pk, pk=pk)


def _workflow(name: object) -> Workflow:
    return _one(Workflow, "workflow", name, name=str(name))


def _provider(slug: str) -> Provider:
    return _one(Provider, "provider", slug, slug=slug)


def _reason(body: dict[str, Any]) -> str:
    reason = body.get("reason") or ""
    if not isinstance(reason, str):
        raise InvalidInput("reason must be a string", field="reason")
    return reason[:500]


@lever
def org_hold(body: dict[str, Any], actor: str, *, slug: str) -> None:
    org_services.org_hold(org=_org(slug), actor=actor, reason=_reason(body))


@lever
def org_release(body: dict[str, Any], actor: str, *, slug: str) -> None:
    org_services.org_release(org=_org(slug), actor=actor, reason=_reason(body))


@lever
def org_weight(body: dict[str, Any], actor: str, *, slug: str) -> None:
    org_services.org_weight_set(org=_org(slug), weight=_required(body, "weight"), actor=actor, reason=_reason(body))


@lever
def org_cap(body: dict[str, Any], actor: str, *, slug: str) -> None:
    org_services.org_cap_set(
        org=_org(slug), max_concurrency=_required(body, "max_concurrency"), actor=actor, reason=_reason(body)
    )


@lever
def org_queue_limit(body: dict[str, Any], actor: str, *, slug: str) -> None:
    org_services.org_queue_limit_set(
        org=_org(slug), queue_limit=_required(body, "queue_limit"), actor=actor, reason=_reason(body)
    )


@lever
def org_cost(body: dict[str, Any], actor: str, *, slug: str) -> None:
    org_services.workflow_cost_set(
        org=_org(slug),
        workflow=_workflow(_required(body, "workflow")),
        cost=_required(body, "cost"),
        actor=actor,
        reason=_reason(body),
    )


@lever
def budget(body: dict[str, Any], actor: str) -> None:
    scheduling_services.budget_set(budget=_required(body, "budget"), actor=actor)


@lever
def policy(body: dict[str, Any], actor: str) -> None:
    scheduling_services.policy_set(policy=_required(body, "policy"), quantum=body.get("quantum"), actor=actor)


@lever
def chart_pause(body: dict[str, Any], actor: str, *, pk: int) -> None:
    chart_services.chart_pause(chart=_chart(pk), actor=actor, reason=_reason(body))


@lever
def chart_resume(body: dict[str, Any], actor: str, *, pk: int) -> None:
    chart_services.chart_resume(chart=_chart(pk), actor=actor, reason=_reason(body))


@lever
def chart_priority(body: dict[str, Any], actor: str, *, pk: int) -> None:
    chart_services.chart_prioritize(
        chart=_chart(pk), high_priority=body.get("high_priority"), priority=body.get("priority"), actor=actor
    )


@lever
def chart_top(body: dict[str, Any], actor: str, *, pk: int) -> None:
    chart_services.chart_move_to_top(chart=_chart(pk), actor=actor)


@lever
def chart_cancel(body: dict[str, Any], actor: str, *, pk: int) -> None:
    chart_services.chart_cancel(chart=_chart(pk), actor=actor, reason=_reason(body))


@lever
def provider_pause(body: dict[str, Any], actor: str, *, slug: str) -> dict[str, Any]:
    raw = _required(body, "until")
    try:
        until = parse_datetime(raw) if isinstance(raw, str) else None
    except ValueError:  # well formed but not a date, like month 99
        until = None
    if until is None:
        raise InvalidInput(f"until must be an ISO 8601 date and time, got {raw!r}", field="until")
    org = _org(body["org"]) if body.get("org") else None
    pause = org_services.provider_pause(
        provider=_provider(slug), until=until, org=org, actor=actor, reason=_reason(body)
    )
    return {"until": pause.until.isoformat()}


@lever
def provider_resume(body: dict[str, Any], actor: str, *, slug: str) -> dict[str, Any]:
    org = _org(body["org"]) if body.get("org") else None
    return {"ended": org_services.provider_resume(provider=_provider(slug), org=org, actor=actor)}


@lever
def what_if(body: dict[str, Any], actor: str) -> dict[str, Any]:
    """Preview how every org's clear-time would move under `changes`, computed by the core on the
    current snapshot; nothing is written. The service validates the changes as the levers would."""
    return {"preview": scheduling_services.plan_preview(changes=_required(body, "changes"))}
