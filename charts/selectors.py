"""Reads on charts shared by the portal and the API, always within a caller's orgs.

`org_ids` is the set of orgs a caller may see; None means every org (staff). A chart outside it is
NotFound, exactly like one that does not exist.
"""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import F, QuerySet

from charts.models import Chart, ChartEvent, ChartState
from fairsched.errors import InvalidInput, NotFound

OrgIds = Collection[int] | None

# Columns a chart list shows; the payload and the full error text stay in the database.
LIST_FIELDS = (
    "id",
    "org_id",
    "org__slug",
    "workflow_id",
    "workflow__name",
    "external_id",
    "state",
    "high_priority",
    "priority",
    "attempt",
    "last_error",
    "created_at",
    "started_at",
    "finished_at",
)
ERROR_SUMMARY_LENGTH = 200


def charts_visible(
    *,
    org_ids: OrgIds,
    org_slug: str | None = None,
    state: str | None = None,
    workflow: str | None = None,
    external_id: str | None = None,
) -> QuerySet[Chart]:
    """The caller's charts, filtered; a filter naming a foreign org finds nothing, like an empty org."""
    # The plan's fields come with every chart (see ChartManager); `only` names the chart's own.
    charts = Chart.objects.select_related("org", "workflow").only(*LIST_FIELDS)
    if org_ids is not None:
        charts = charts.filter(org_id__in=list(org_ids))
    if org_slug:
        charts = charts.filter(org__slug=org_slug)
    if state:
        if state not in ChartState.values:
            raise InvalidInput(f"state must be one of {', '.join(ChartState.values)}", field="state")
        charts = charts.filter(state=state)
    if workflow:
        charts = charts.filter(workflow__name=workflow)
    if external_id:
        charts = charts.filter(external_id=external_id)
    return charts


def charts_in_queue_order(charts: QuerySet[Chart]) -> QuerySet[Chart]:
    """Planned charts by their place in the fair order, then the rest newest first."""
    return charts.order_by(F("position").asc(nulls_last=True), "-id")


def chart_get(*, org_ids: OrgIds, chart_id: int) -> Chart:
    chart = Chart.objects.select_related("org", "workflow").filter(pk=chart_id)
    if org_ids is not None:
        chart = chart.filter(org_id__in=list(org_ids))
    found = chart.first()
    if found is None:
        raise NotFound("chart not found", field="detail")
    return found


def chart_history(*, chart: Chart) -> QuerySet[ChartEvent]:
    return ChartEvent.objects.filter(chart=chart).only("from_state", "to_state", "at").order_by("at", "id")


def last_error_summary(text: str) -> str:
    """What a customer may see of a failure: the first line of the last error, shortened.

    Tracebacks and anything after the first line stay internal (they can name hosts, paths, code)."""
    if not text:
        return ""
    first = text.strip().splitlines()[0].strip() if text.strip() else ""
    if first.startswith("Traceback"):
        # The message of a raw traceback is its last line; the frames in between stay internal.
        first = text.strip().splitlines()[-1].strip()
    if len(first) > ERROR_SUMMARY_LENGTH:
        first = first[: ERROR_SUMMARY_LENGTH - 1].rstrip() + "…"
    return first
