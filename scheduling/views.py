"""The operators' dashboard: one staff-only page and the reads it refreshes. It writes nothing.

Every lever on the page calls the REST API (`/api/v1/`, the staff session and its CSRF token), so a
lever exists once: service, serializer, API action. The tables are server-rendered partials that the
page swaps in (htmx) when the WebSocket says what changed; the virtualised queue and the plots read
JSON. Reads go through `scheduling.selectors`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from fairsched.errors import InvalidInput, NotFound, ServiceError
from orgs.models import Org
from scheduling import selectors
from scheduling.models import SchedulerConfig

QUEUE_PAGE = 100

View = Callable[..., HttpResponse]


def _is_staff(request: HttpRequest) -> bool:
    return bool(request.user.is_authenticated and request.user.is_active and request.user.is_staff)


def staff_only(view: View) -> View:
    """Reads a page fetches answer 403 to anyone but active staff (no login redirect for a fetch)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _is_staff(request):
            return JsonResponse({"detail": ["staff only"]}, status=403)
        return view(request, *args, **kwargs)

    return wrapper


# Partials ------------------------------------------------------------------------------------------
# Each partial is a template fed by its selector(s); the page includes all of them, and refetches one
# when a WebSocket hint names something it shows. The page reads what several partials share once
# (the per-(org, state) aggregate, the workflows and providers) and hands it in as `Shared`.


@dataclass(frozen=True)
class Shared:
    load: selectors.Load | None = None
    meta: dict[str, Any] | None = None

    def workflows_and_providers(self) -> dict[str, Any]:
        return self.meta if self.meta is not None else selectors.workflows_and_providers()


def _summary(shared: Shared) -> dict[str, Any]:
    summary = selectors.summary(load=shared.load)
    share = min(100.0, 100.0 * summary["cost_in_use"] / max(1, summary["budget"]))
    return {"summary": summary, "budget_share": share}


def _config(shared: Shared) -> dict[str, Any]:
    return {"config": SchedulerConfig.load(), "policies": SchedulerConfig.Policy.choices}


def _orgs(shared: Shared) -> dict[str, Any]:
    return {"orgs": selectors.org_rows(load=shared.load), "workflows": shared.workflows_and_providers()["workflows"]}


def _inflight(shared: Shared) -> dict[str, Any]:
    return {"inflight": selectors.in_flight()}


def _outside(shared: Shared) -> dict[str, Any]:
    return {"outside": selectors.outside_plan()}


def _providers(shared: Shared) -> dict[str, Any]:
    return {"providers": shared.workflows_and_providers()["providers"]}


def _events(shared: Shared) -> dict[str, Any]:
    return {"events": selectors.recent_events()}


PARTIALS: dict[str, Callable[[Shared], dict[str, Any]]] = {
    "summary": _summary,
    "config": _config,
    "orgs": _orgs,
    "inflight": _inflight,
    "outside": _outside,
    "providers": _providers,
    "events": _events,
}


@never_cache
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """The page with every partial rendered in, and the queue's first page and the plots' samples
    inlined as JSON, so that the first paint needs no second request."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), login_url=reverse("admin:login"))
    if not _is_staff(request):
        return HttpResponse("The dashboard is for staff.", status=403, content_type="text/plain")
    meta = selectors.workflows_and_providers()
    shared = Shared(load=selectors.active_load(), meta=meta)
    context: dict[str, Any] = {"api": reverse("api-root")}
    for make in PARTIALS.values():
        context.update(make(shared))
    context["initial"] = {"queue": selectors.queue_page(limit=QUEUE_PAGE), "samples": selectors.queue_samples()}
    context["org_slugs"] = [org["slug"] for org in context["orgs"]]
    context["workflow_names"] = [workflow["name"] for workflow in meta["workflows"]]
    context["provider_choices"] = [(provider["slug"], provider["name"]) for provider in meta["providers"]]
    return render(request, "dashboard/index.html", context)


@never_cache
@require_GET
@staff_only
def partial(request: HttpRequest, name: str) -> HttpResponse:
    """One partial of the page, as the page includes it (`dashboard/_<name>.html`)."""
    make = PARTIALS.get(name)
    if make is None:
        raise Http404(f"no partial {name!r}")
    return render(request, f"dashboard/_{name}.html", {"api": reverse("api-root"), **make(Shared())})


# JSON for what JavaScript draws ---------------------------------------------------------------------


@never_cache
@require_GET
@staff_only
def samples(request: HttpRequest) -> JsonResponse:
    """The queue's history for the depth and budget plots."""
    return JsonResponse({"samples": selectors.queue_samples()})


@never_cache
@require_GET
@staff_only
def queue(request: HttpRequest) -> JsonResponse:
    """A page of the queue in fair order: `?start=<position>` or `?org=<slug>&offset=<n>`; `limit` <= 500."""
    try:
        start = _query_int(request, "start", 0)
        offset = _query_int(request, "offset", 0)
        limit = _query_int(request, "limit", QUEUE_PAGE)
        org = _org(request.GET["org"]) if request.GET.get("org") else None
    except ServiceError as error:
        return JsonResponse(error.as_dict(), status=error.status)
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


def _org(slug: str) -> Org:
    org = Org.objects.filter(slug=slug).first()
    if org is None:
        raise NotFound(f"no org {slug!r}", field="org")
    return org
