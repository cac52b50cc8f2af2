"""The customer portal: an org's charts, their place in the queue and when they will be done, and the
customer's levers on them.

Every page is scoped to the user's memberships: another org's slug or chart id is a 404, exactly like
one that does not exist. Staff use the dashboard; the portal shows them only orgs they belong to, and
acts for everyone as a tenant.

Members and admins of an org act in it (submit one chart or a file of many, pause, resume, cancel);
viewers read and see no buttons, and a write they try anyway is 403. Writes go through the services
the API uses, with the API's parsing, the API's write throttle (one bucket per user, shared with the
user's API session) and the event log's actor; Django's CSRF check guards every form.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request

from charts import services
from charts.drain import drain_plot
from charts.models import CLAIMABLE_STATES, TERMINAL_STATES, Chart, ChartState
from charts.portal_input import Upload, item_from_form, upload_read
from charts.running import duration_words
from charts.selectors import (
    backlog_finishes,
    chart_events,
    chart_get,
    charts_in_queue_order,
    charts_visible,
    events_as_seen,
    last_error_summary,
    org_summary,
    submit_warnings,
)
from charts.waiting import waiting_words
from common.actors import Actor
from common.errors import BulkInvalid, FieldsInvalid, Forbidden, InvalidInput, NotFound, QueueFull, ServiceError
from common.reasons import ReasonSerializer
from knobs.models import SchedulerConfig
from orgs.access import CallerWriteThrottle
from orgs.models import Membership, Org
from orgs.selectors import member_orgs, membership_get, workflows_all

PAGE_SIZE = 50


def _user_id(request: HttpRequest) -> int:
    return int(request.user.pk or 0)


def _membership(request: HttpRequest, slug: str) -> Membership:
    try:
        return membership_get(user_id=_user_id(request), slug=slug)
    except NotFound:
        raise Http404("No such org") from None


def _org(request: HttpRequest, slug: str) -> Org:
    return _membership(request, slug).org


def _chart(org: Org, chart_id: int) -> Chart:
    try:
        return chart_get(org_ids=[org.pk], chart_id=chart_id)
    except NotFound:
        raise Http404("No such chart") from None


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Straight to the user's first org; a user in no org is told so."""
    orgs = member_orgs(user_id=_user_id(request))
    if not orgs:
        return render(request, "portal/no_org.html")
    return redirect("portal:org", org_slug=orgs[0].slug)


def _table_context(request: HttpRequest, org: Org) -> dict[str, Any]:
    """The chart table: filter by state, search by external id (prefix), 50 a page in queue order."""
    state = request.GET.get("state", "")
    if state not in ChartState.values:
        state = ""
    query = request.GET.get("q", "").strip()[:200].replace("\x00", "")
    charts = charts_visible(org_ids=[org.pk], states=[state] if state else None)
    if query:
        charts = charts.filter(external_id__startswith=query)
    page = Paginator(charts_in_queue_order(charts), PAGE_SIZE).get_page(request.GET.get("page"))
    # The retry policy only for a page with a retry on it (its words name the attempt to come).
    retrying = any(chart.state == ChartState.RETRY_WAIT for chart in page.object_list)
    max_attempts = SchedulerConfig.load().max_attempts if retrying else 0
    rows = [
        (chart, last_error_summary(chart.last_error), waiting_words(chart, max_attempts=max_attempts))
        for chart in page.object_list
    ]
    filters = {key: value for key, value in (("state", state), ("q", query)) if value}
    return {
        "org": org,
        "page": page,
        "rows": rows,
        "state": state,
        "query": query,
        "filters": filters,
        "states": ChartState.choices,
    }


def _summary_context(org: Org) -> dict[str, Any]:
    summary = org_summary(org=org)
    return {
        "summary": summary,
        "counts": [(label, summary.counts[value]) for value, label in ChartState.choices],
        "drain": drain_plot(finishes=backlog_finishes(org_id=org.pk), now=timezone.now()),
    }


@login_required
def org_charts(request: HttpRequest, org_slug: str) -> HttpResponse:
    membership = _membership(request, org_slug)
    org = membership.org
    context = {
        **_table_context(request, org),
        **_summary_context(org),
        "orgs": member_orgs(user_id=_user_id(request)),
        "can_act": membership.can_write,
        "is_admin": membership.role == Membership.Role.ADMIN,
        **(_submit_form_context({}) if membership.can_write else {}),
        # How far back the finished charts go (scheduling.retention; 0: all are kept).
        "retention_days": settings.FAIRSCHED_RETENTION_DAYS,
    }
    return render(request, "portal/org.html", context)


def _submit_form_context(submitted: dict[str, str]) -> dict[str, Any]:
    """What the one-chart form shows: the workflows, the tenant's priority range, and the values typed."""
    return {
        "workflows": workflows_all(),
        "priority_range": (services.TENANT_PRIORITY.minimum, services.TENANT_PRIORITY.maximum),
        "submitted": {"priority": "0", **submitted},
    }


@login_required
def org_charts_table(request: HttpRequest, org_slug: str) -> HttpResponse:
    """The table alone, which the page's script refetches when the org's WebSocket says something moved."""
    org = _org(request, org_slug)
    return render(request, "portal/_live.html", {**_table_context(request, org), **_summary_context(org)})


def _chart_context(membership: Membership, chart_id: int) -> dict[str, Any]:
    """A chart: its plan, its retry schedule, its history as a tenant may see it (`events_as_seen`),
    the levers its state allows to members who may act, and how fresh the plan is."""
    org = membership.org
    chart = _chart(org, chart_id)
    events = list(chart_events(chart=chart))
    config = SchedulerConfig.load()
    max_attempts = config.max_attempts
    failed_at = next((event.at for event in reversed(events) if event.to_state == ChartState.RETRY_WAIT), None)
    return {
        "org": org,
        "chart": chart,
        "error": last_error_summary(chart.last_error),
        "history": events_as_seen(events=events, org_id=org.pk, staff=False),
        "max_attempts": max_attempts,
        "waiting": waiting_words(chart, max_attempts=max_attempts, failed_at=failed_at),
        "can_act": membership.can_write,
        "can_pause": chart.state in CLAIMABLE_STATES,
        "can_resume": chart.state == ChartState.PAUSED,
        "can_cancel": chart.state not in TERMINAL_STATES,
    }


@login_required
def chart_detail(request: HttpRequest, org_slug: str, chart_id: int) -> HttpResponse:
    """A chart's page, live as the org's is: its part (`chart_part`) is refetched on the org's hints."""
    membership = _membership(request, org_slug)
    context = _chart_context(membership, chart_id)
    return render(request, "portal/chart.html", {**context, "orgs": member_orgs(user_id=_user_id(request))})


@login_required
def chart_part(request: HttpRequest, org_slug: str, chart_id: int) -> HttpResponse:
    """The chart's part alone, which the page's script refetches when the org's WebSocket says something moved."""
    context = _chart_context(_membership(request, org_slug), chart_id)
    return render(request, "portal/_chart.html", context)


# --- the levers ---------------------------------------------------------------------------------


class FileTooLarge(ServiceError):
    """A file past the request body limit (DATA_UPLOAD_MAX_MEMORY_SIZE), as the API's 413."""

    status = 413


class OverRate(ServiceError):
    """The user is over the API's write rate (the portal counts against it too)."""

    status = 429

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many changes in a short time; try again in {retry_after} s")
        self.retry_after = retry_after


def _refused(
    request: HttpRequest,
    org: Org,
    error: ServiceError,
    *,
    rows: list[str] | None = None,
    submitted: dict[str, str] | None = None,
) -> HttpResponse:
    """The page that says what was refused and why, with the service's status (400, 403, 409, 429):
    each problem names its field, and for a file its row (and line). A refused form (`submitted`) is
    shown again below, filled with what was typed."""
    problems: list[str] = []
    if isinstance(error, BulkInvalid):
        for index, fields in sorted(error.errors.items()):
            where = rows[index] if rows and index < len(rows) else f"row {index + 1}"
            problems.extend(f"{where}: {field}: {message}" for field, texts in fields.items() for message in texts)
        problems.extend(f"org: {message}" for message in error.org or [])
    elif isinstance(error, FieldsInvalid):
        problems.extend(f"{field}: {message}" for field, texts in error.errors.items() for message in texts)
    elif isinstance(error, QueueFull) and error.waiting is not None and error.limit is not None:
        problems.extend(_queue_full_words(error, waiting=error.waiting, limit=error.limit))
    else:
        problems.append(f"{error.field}: {error.message}" if error.field else error.message)
    context: dict[str, Any] = {"org": org, "problems": problems, "error": error}
    if submitted is not None:
        context.update(_submit_form_context(submitted))
    response = render(request, "portal/refused.html", context, status=error.status)
    if isinstance(error, QueueFull | OverRate) and error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


def _queue_full_words(error: QueueFull, *, waiting: int, limit: int) -> list[str]:
    """The queue limit's refusal in a customer's words: how many charts still fit, and when to retry."""
    fits = max(0, limit - waiting)
    charts = "1 chart is" if waiting == 1 else f"{waiting} charts are"
    words = [f"Your queue is full: {charts} waiting and the limit is {limit}; {fits or 'none'} more fit now."]
    if error.held:
        words.append("Your organisation is on hold: the queue moves only once it is released.")
    elif error.retry_after is not None:
        wait = duration_words(error.retry_after)
        words.append(f"Try again in about {wait} ({error.retry_after} s), when your next chart starts.")
    return words


def _over_rate(request: HttpRequest) -> float | None:
    """The API's write throttle for this user's session: seconds to wait when over the rate, else None.
    The session is authenticated as the API authenticates one, so both count in the same bucket."""
    throttle = CallerWriteThrottle()
    if throttle.allow_request(Request(request, authenticators=[SessionAuthentication()]), None):  # type: ignore[arg-type]
        return None
    return throttle.wait() or 1.0


def _acting(request: HttpRequest, org_slug: str) -> tuple[Org, HttpResponse | None]:
    """The org a lever is pulled in, or the refusal: 404 outside the user's orgs, 403 for a viewer,
    429 over the write rate."""
    membership = _membership(request, org_slug)
    if not membership.can_write:
        return membership.org, _refused(request, membership.org, Forbidden("your membership in this org is read-only"))
    wait = _over_rate(request)
    if wait is not None:
        return membership.org, _refused(request, membership.org, OverRate(math.ceil(wait)))
    return membership.org, None


LEVERS = {"pause": services.chart_pause, "resume": services.chart_resume, "cancel": services.chart_cancel}
LEVER_DONE = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}


@login_required
@require_POST
def chart_lever(request: HttpRequest, org_slug: str, chart_id: int, lever: str) -> HttpResponse:
    """Pause, resume or cancel a chart, with an optional reason, as the API's actions do; back to the
    chart's page, or the refusal (409 for a lever its state does not allow). A cancel is asked about
    first (`confirmed=yes` posts it)."""
    org, refusal = _acting(request, org_slug)
    if refusal is not None:
        return refusal
    chart = _chart(org, chart_id)
    if lever == "cancel" and request.POST.get("confirmed") != "yes":
        # A cancel cannot be undone: first a page that asks, naming what the user sees, the reason
        # typed kept for the second step. A form, not a script, so it works under the CSP and without JS.
        return render(
            request,
            "portal/cancel_confirm.html",
            {"org": org, "chart": chart, "reason": request.POST.get("reason", "").strip()},
        )
    # The API's reason, read by the API's serializer: the same limits and the same refusals.
    body = ReasonSerializer(data={"reason": request.POST.get("reason", "").strip()})
    try:
        if not body.is_valid():
            ((field, texts),) = list(body.errors.items())[:1]
            raise InvalidInput(str(texts[0]), field=field)
        LEVERS[lever](chart=chart, actor=Actor.tenant(request.user, [org.pk]), reason=body.validated_data["reason"])
    except ServiceError as error:
        return _refused(request, org, error)
    messages.success(request, f"{LEVER_DONE[lever]} {chart.external_id}.")
    return redirect("portal:chart", org_slug=org.slug, chart_id=chart.pk)


@login_required
@require_POST
def submit_one(request: HttpRequest, org_slug: str) -> HttpResponse:
    """Submit one chart from the form: the API's item, read from text (`item_from_form`), judged by
    `chart_submit` as the API's single submit is (every field's problem at once; only refused staff
    levers: 403). A refusal shows the form again with what was typed; a repeat shows the existing chart."""
    org, refusal = _acting(request, org_slug)
    if refusal is not None:
        return refusal
    fields = {key: request.POST.get(key, "") for key in ("workflow", "external_id", "priority", "payload", "due_at")}
    item = item_from_form(fields)
    try:
        chart, created = services.chart_submit(
            org=org,
            workflow=item.workflow,
            external_id=item.external_id,
            payload=item.payload,
            high_priority=item.high_priority,
            priority=item.priority,
            due_at=item.due_at,
            actor=Actor.tenant(request.user, [org.pk]),
            problems=item.problems,
        )
    except ServiceError as error:
        return _refused(request, org, error, submitted=fields)
    messages.success(
        request, f"Submitted {chart.external_id}." if created else f"{chart.external_id} was submitted before."
    )
    for warning in submit_warnings(org=org, due_ats=[item.due_at], results=[(chart, created)]).get(0, []):
        messages.warning(request, f"{chart.external_id}: {warning.message}.")
    return redirect("portal:chart", org_slug=org.slug, chart_id=chart.pk)


@login_required
@require_POST
def submit_file(request: HttpRequest, org_slug: str) -> HttpResponse:
    """Submit a CSV or JSON file of charts, all or nothing, as the API's bulk submit: every problem of
    every bad row is reported by its row (and line) and field in one answer, and nothing is written."""
    org, refusal = _acting(request, org_slug)
    if refusal is not None:
        return refusal
    upload: Upload | None = None
    try:
        file = request.FILES.get("file")
        if file is None:
            raise InvalidInput("choose a CSV or JSON file of charts", field="file")
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and file.size is not None and file.size > limit:
            raise FileTooLarge(f"the file is larger than {limit} bytes; split it")
        upload = upload_read(name=file.name or "", raw=file.read(), org_slug=org.slug)
        results = services.chart_submit_bulk(org=org, items=upload.items, actor=Actor.tenant(request.user, [org.pk]))
    except ServiceError as error:
        return _refused(request, org, error, rows=upload.rows if upload is not None else None)
    created = sum(1 for _, is_new in results if is_new)
    messages.success(
        request, f"Submitted {created} chart{'s' if created != 1 else ''}; {len(results) - created} submitted before."
    )
    warned = submit_warnings(org=org, due_ats=[item.due_at for item in upload.items], results=results)
    for index, warnings in sorted(warned.items()):
        for warning in warnings:
            messages.warning(request, f"{upload.rows[index]}, {results[index][0].external_id}: {warning.message}.")
    return redirect("portal:org", org_slug=org.slug)
