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
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from common.api import etag
from common.errors import InvalidInput, NotFound, ServiceError
from knobs.models import SchedulerConfig
from orgs.models import Org
from scheduling import selectors

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
# Each partial is a template fed by its selector(s); the page includes them (the org table comes with the
# page's first resync), and a WebSocket hint refetches those it moved in one request. What several
# partials read (the per-(org, state) aggregate, the workflows and providers) is read once and handed in
# as `Shared`; a hint about one org reads that org's row alone.


@dataclass(frozen=True)
class Shared:
    """What the partials of one response share: the aggregate, the workflows and providers, and the
    one org whose row alone is asked for (`org_id`, a hint about one org)."""

    load: selectors.Load | None = None
    meta: dict[str, Any] | None = None
    org_id: int | None = None

    def workflows_and_providers(self) -> dict[str, Any]:
        return self.meta if self.meta is not None else selectors.workflows_and_providers()


def _summary(shared: Shared) -> dict[str, Any]:
    summary = selectors.summary(load=shared.load)
    share = min(100.0, 100.0 * summary["cost_in_use"] / max(1, summary["budget"]))
    return {"summary": summary, "budget_share": share, "accuracy": selectors.eta_accuracy()}


def _config(shared: Shared) -> dict[str, Any]:
    config = SchedulerConfig.load()
    # Its forms send back the ETag of the values they show (If-Match): an edit made meanwhile is a 412.
    return {"config": config, "config_etag": etag(config), "policies": SchedulerConfig.Policy.choices}


def _orgs(shared: Shared) -> dict[str, Any]:
    return {"orgs": selectors.org_rows(load=shared.load, org_id=shared.org_id)}


def _inflight(shared: Shared) -> dict[str, Any]:
    return {"inflight": selectors.in_flight()}


def _at_risk(shared: Shared) -> dict[str, Any]:
    return {"at_risk": selectors.at_risk()}


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
    "at_risk": _at_risk,
    "outside": _outside,
    "providers": _providers,
    "events": _events,
}


@never_cache
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """The page with its partials rendered in (but the header and the org table, LATER), and the queue's
    first page and the plots' samples inlined as JSON, so that the queue paints with no second request."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), login_url=reverse("admin:login"))
    if not _is_staff(request):
        return HttpResponse("The dashboard is for staff.", status=403, content_type="text/plain")
    meta = selectors.workflows_and_providers()
    shared = Shared(meta=meta)
    context: dict[str, Any] = {"api": reverse("api-root")}
    for name, make in PARTIALS.items():
        if name not in LATER:
            context.update(make(shared))
    context["initial"] = {"queue": selectors.queue_page(limit=QUEUE_PAGE), "samples": selectors.queue_samples()}
    # Three selects list every org: their options are written once (500 orgs through a template loop
    # three times were a third of the page's time).
    slugs = [escape(slug) for slug in Org.objects.order_by("slug").values_list("slug", flat=True)]
    context["org_options"] = mark_safe("".join(f'<option value="{slug}">{slug}</option>' for slug in slugs))  # noqa: S308
    context["workflows"] = meta["workflows"]
    context["provider_choices"] = [(provider["slug"], provider["name"]) for provider in meta["providers"]]
    return render(request, "dashboard/index.html", context)


# The org table (500 orgs: 400 KB of rows) and the header come with the page's first resync, once its
# socket has joined and the queue has painted: both are made of the aggregate of every active chart
# (a scan of the charts: bench/bench_dashboard.py), which the first paint need not wait for, and which the
# resync then reads once for both.
LATER = {"summary", "orgs"}

# Where each partial goes on the page: the element's id and tag (a swap's wrapper must be the same kind
# of element, so that a table's rows parse as rows).
REGIONS: dict[str, tuple[str, str]] = {
    "summary": ("summary", "div"),
    "config": ("config", "div"),
    "orgs": ("org-rows", "tbody"),
    "inflight": ("inflight", "section"),
    "at_risk": ("at-risk", "section"),
    "outside": ("outside", "details"),
    "providers": ("provider-list", "ul"),
    "events": ("events", "ol"),
}


@never_cache
@require_GET
@staff_only
def partials(request: HttpRequest) -> HttpResponse:
    """The partials a WebSocket hint moved (`?names=summary,orgs`), in one response: each is an
    out-of-band swap of its region (htmx), so one hint costs one request and one shared aggregate.
    `&org=<id>` narrows the org table to that org's row (a hint about one org), swapped alone."""
    names = [name for name in request.GET.get("names", "").split(",") if name]
    unknown = sorted(set(names) - set(PARTIALS))
    if not names or unknown:
        problem = f"unknown partial(s): {', '.join(unknown)}" if unknown else "name at least one partial"
        return JsonResponse({"names": [problem]}, status=400)
    try:
        org_id = _query_int(request, "org", 0) or None
    except ServiceError as error:
        return JsonResponse(error.as_dict(), status=error.status)
    # One org's row reads that org's charts only; the whole table shares the summary's aggregate.
    whole_table = org_id is None and {"summary", "orgs"} <= set(names)
    shared = Shared(load=selectors.active_load() if whole_table else None, org_id=org_id)
    context: dict[str, Any] = {"api": reverse("api-root")}
    for name in names:
        context.update(PARTIALS[name](shared))
    regions = [(*REGIONS[name], f"dashboard/_{name}.html") for name in dict.fromkeys(names)]
    if org_id is not None and "orgs" in names:
        regions = [region for region in regions if region[0] != "org-rows"]
        context["one_org"] = True
    context["regions"] = regions
    return render(request, "dashboard/_regions.html", context)


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
