"""The customer status portal: an org's charts, their place in the queue and when they will be done.

Every page is scoped to the user's memberships: another org's slug or chart id is a 404, exactly like
one that does not exist. Staff use the dashboard; the portal shows them only orgs they belong to.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from charts.models import ChartState
from charts.selectors import chart_get, chart_history, charts_in_queue_order, charts_visible, last_error_summary
from fairsched.errors import NotFound
from orgs.models import Org
from orgs.selectors import member_org, member_orgs, org_summary

PAGE_SIZE = 50


def _user_id(request: HttpRequest) -> int:
    return int(request.user.pk or 0)


def _org(request: HttpRequest, slug: str) -> Org:
    try:
        return member_org(user_id=_user_id(request), slug=slug)
    except NotFound:
        raise Http404("No such org") from None


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
    charts = charts_visible(org_ids=[org.pk], state=state or None)
    if query:
        charts = charts.filter(external_id__startswith=query)
    page = Paginator(charts_in_queue_order(charts), PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(chart, last_error_summary(chart.last_error)) for chart in page.object_list]
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
    return {"summary": summary, "counts": [(label, summary.counts[value]) for value, label in ChartState.choices]}


@login_required
def org_charts(request: HttpRequest, org_slug: str) -> HttpResponse:
    org = _org(request, org_slug)
    context = {**_table_context(request, org), **_summary_context(org), "orgs": member_orgs(user_id=_user_id(request))}
    return render(request, "portal/org.html", context)


@login_required
def org_charts_table(request: HttpRequest, org_slug: str) -> HttpResponse:
    """The table alone, which the page's script refetches when the org's WebSocket says something moved."""
    org = _org(request, org_slug)
    return render(request, "portal/_live.html", {**_table_context(request, org), **_summary_context(org)})


@login_required
def chart_detail(request: HttpRequest, org_slug: str, chart_id: int) -> HttpResponse:
    org = _org(request, org_slug)
    try:
        chart = chart_get(org_ids=[org.pk], chart_id=chart_id)
    except NotFound:
        raise Http404("No such chart") from None
    return render(
        request,
        "portal/chart.html",
        {
            "org": org,
            "chart": chart,
            "error": last_error_summary(chart.last_error),
            "history": chart_history(chart=chart),
            "orgs": member_orgs(user_id=_user_id(request)),
        },
    )
