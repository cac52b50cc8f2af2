"""Reads on charts shared by the portal and the API, always within a caller's orgs.

`org_ids` is the set of orgs a caller may see; None means every org (staff). A chart outside it is
NotFound, exactly like one that does not exist.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, F, QuerySet
from django.utils import timezone

from charts.drain import Finish
from charts.models import ACTIVE_STATES, PLAN_FIELDS, Chart, ChartEvent, ChartPlan, ChartState, DurationStat
from charts.promise import THRESHOLD_ATTRIBUTE, THRESHOLD_SQL, as_flag, at_risk_q, late_q, with_threshold
from common import rows
from common.errors import InvalidInput, NotFound
from orgs.models import Org, Workflow

OrgIds = Collection[int] | None

# Columns a chart list shows; the payload and the full error text stay in the database.
LIST_FIELDS = (
    "id",
    "org_id",
    "org__slug",
    "org__weight",
    "workflow_id",
    "workflow__name",
    "external_id",
    "state",
    "high_priority",
    "priority",
    "attempt",
    "available_at",
    "last_error",
    "created_at",
    "started_at",
    "finished_at",
    "due_at",
)
ERROR_SUMMARY_LENGTH = 200
# The largest value of PostgreSQL's bigint (the ids).
BIGINT_MAX = 2**63 - 1


@dataclass(frozen=True)
class SubmitWarning:
    """Something a submission was accepted despite: the field it is about, and what to know."""

    field: str
    message: str


def expected_durations(*, org: Org, workflows: Collection[Workflow]) -> dict[int, float]:
    """Seconds a run of each workflow (by id) is expected to take for the org, as the submission
    judges a due time: the mean learned of the org's runs of it (`DurationStat`), else the workflow's
    `initial_duration`, else FAIRSCHED_DEFAULT_DURATION. (The plan's own estimate also pools the
    workflow's runs by other orgs and the org's other workflows; that rule is the scheduler's,
    above this app.)"""
    learned = {
        stat.workflow_id: stat.mean
        for stat in DurationStat.objects.filter(org_id=org.pk, workflow__in=list(workflows), count__gt=0)
    }
    default = float(settings.FAIRSCHED_DEFAULT_DURATION)
    return {
        workflow.pk: learned.get(workflow.pk)
        or (float(workflow.initial_duration) if workflow.initial_duration else default)
        for workflow in workflows
    }


def submit_warnings(
    *, org: Org, due_ats: Sequence[datetime | None], results: Sequence[tuple[Chart, bool]]
) -> dict[int, list[SubmitWarning]]:
    """The warnings of an accepted submission, by item index, for the items that gave a due time:

    1. A new chart due sooner after its submission than its workflow is expected to take
       (`expected_durations`): accepted, but likely to be late.
    2. A repeat whose due time is not the one given: the first submission's due time stands.
    """
    pairs = enumerate(zip(due_ats, results, strict=True))
    asked = [(index, due_at, chart, created) for index, (due_at, (chart, created)) in pairs if due_at is not None]
    if not asked:
        return {}
    expected = expected_durations(org=org, workflows={chart.workflow for _, _, chart, created in asked if created})
    warnings: dict[int, list[SubmitWarning]] = {}
    for index, due_at, chart, created in asked:
        assert due_at is not None
        if not created:
            if chart.due_at != due_at:
                stands = "no due time" if chart.due_at is None else f"its due time {chart.due_at.isoformat()}"
                warnings[index] = [
                    SubmitWarning("due_at", f"this chart was submitted before: {stands} stands, not the one given")
                ]
            continue
        seconds = expected[chart.workflow_id]
        if chart.due_at is not None and (chart.due_at - chart.created_at).total_seconds() < seconds:
            warnings[index] = [
                SubmitWarning(
                    "due_at",
                    f"due sooner than a run of {chart.workflow.name} is expected to take ({seconds:.0f} s):"
                    " accepted, but likely to be late",
                )
            ]
    return warnings


def charts_visible(
    *,
    org_ids: OrgIds,
    org_slug: str | None = None,
    states: Collection[str] | None = None,
    workflow: str | None = None,
    external_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    at_risk: bool | None = None,
    late: bool | None = None,
    now: datetime | None = None,
) -> QuerySet[Chart]:
    """The caller's charts, filtered; a filter naming a foreign org finds nothing, like an empty org.
    The times are served by the indexes on `created_at` and `updated_at`. `at_risk` and `late`
    (`charts.promise`, at `now`) keep the charts that are (true) or are not (false)."""
    # The plan's fields come with every chart (see ChartManager); `only` names the chart's own. The
    # at-risk threshold comes in the same statement (`charts.promise`).
    charts = with_threshold(Chart.objects.select_related("org", "workflow").only(*LIST_FIELDS))
    if org_ids is not None:
        charts = charts.filter(org_id__in=list(org_ids))
    if org_slug:
        charts = charts.filter(org__slug=org_slug)
    if states:
        if not set(states) <= set(ChartState.values):
            raise InvalidInput(f"state must be one of {', '.join(ChartState.values)}", field="state")
        charts = charts.filter(state__in=list(states))
    if workflow:
        charts = charts.filter(workflow__name=workflow)
    if external_id:
        charts = charts.filter(external_id=external_id)
    if created_after is not None:
        charts = charts.filter(created_at__gt=created_after)
    if created_before is not None:
        charts = charts.filter(created_at__lt=created_before)
    if updated_after is not None:
        charts = charts.filter(updated_at__gt=updated_after)
    if at_risk is not None or late is not None:
        now = now or timezone.now()
        if at_risk is not None:
            charts = charts.alias(is_at_risk=as_flag(at_risk_q(now=now))).filter(is_at_risk=at_risk)
        if late is not None:
            charts = charts.alias(is_late=as_flag(late_q(now=now))).filter(is_late=late)
    return charts


def charts_in_queue_order(charts: QuerySet[Chart]) -> QuerySet[Chart]:
    """Planned charts by their place in the fair order, then the rest newest first."""
    return charts.order_by(F("position").asc(nulls_last=True), "-id")


# One chart with its org, workflow and plan, in one constant statement (`common/rows.py`): the
# status read is the API's most frequent call, and the ORM's query building was most of its cost. The
# parts are exposed so that the status read can fetch the caller's token in the same statement.
CHART_ROW = rows.Layout(
    [
        ("chart", rows.model_columns(Chart, "c")),
        ("plan", [f'p."{name}"' for name in PLAN_FIELDS]),
        ("promise", [THRESHOLD_SQL]),
        ("org", rows.model_columns(Org, "o")),
        ("workflow", rows.model_columns(Workflow, "w")),
    ]
)
CHART_FROM = (
    f'"{Chart._meta.db_table}" c'
    f' JOIN "{Org._meta.db_table}" o ON o."id" = c."org_id"'
    f' JOIN "{Workflow._meta.db_table}" w ON w."id" = c."workflow_id"'
    f' LEFT JOIN "{ChartPlan._meta.db_table}" p ON p."chart_id" = c."id"'
)
CHART_GET_SQL = f'SELECT {CHART_ROW.sql} FROM {CHART_FROM} WHERE c."id" = %s'  # noqa: S608 (names from the models; values are parameters)


def chart_get(*, org_ids: OrgIds, chart_id: int) -> Chart:
    """The chart with its org, workflow and plan (as `Chart.objects` reads it) and the at-risk
    threshold (`charts.promise`), if the caller may see it."""
    sql, params = CHART_GET_SQL, [chart_id]
    if org_ids is not None:
        sql = f'{sql} AND c."org_id" = ANY(%s)'
        params.append(list(org_ids))  # type: ignore[arg-type]
    row = rows.fetch_one(sql, params) if chart_id <= BIGINT_MAX else None
    if row is None:
        raise chart_not_found()
    return chart_from_row(row)


def chart_from_row(values: Sequence[object], layout: rows.Layout = CHART_ROW) -> Chart:
    """The chart of a row laid out by `layout` (`CHART_ROW`, or a layout that adds it to others),
    with its org, workflow and plan."""
    chart = rows.from_row(Chart, layout.part(values, "chart"))
    for name, value in zip(PLAN_FIELDS, layout.part(values, "plan"), strict=True):
        setattr(chart, name, value)
    (threshold,) = layout.part(values, "promise")
    setattr(chart, THRESHOLD_ATTRIBUTE, threshold)
    chart.org = rows.from_row(Org, layout.part(values, "org"))
    chart.workflow = rows.from_row(Workflow, layout.part(values, "workflow"))
    return chart


def chart_not_found() -> NotFound:
    """A chart that does not exist, or that the caller may not see: the same answer."""
    return NotFound("chart not found", field="detail")


def chart_events(*, chart: Chart) -> QuerySet[ChartEvent]:
    """A chart's whole history, oldest first. Transitions of one chart are serialised by their
    compare-and-swap, so the event ids are in the order the transitions happened."""
    return ChartEvent.objects.filter(chart=chart).order_by("id")


SYSTEM_ACTOR_PREFIX = "system:"
USER_ACTOR_PREFIX = "user:"
STAFF_ACTOR = "staff"
"""How a tenant sees a person outside the chart's org (an operator, an account manager)."""


@dataclass(frozen=True)
class EventView:
    """One transition of a chart as a caller may see it."""

    at: datetime
    from_state: str
    to_state: str
    reason: str
    actor: str


def events_as_seen(*, events: Sequence[ChartEvent], org_id: int, staff: bool) -> list[EventView]:
    """The events as the caller may see them. Staff see them whole. A tenant sees:

    1. the scheduler's own actors (`system:...`) as they are;
    2. `user:<name>` when that user is a member of the chart's org (a colleague), else `staff`, so
       that no operator's username leaves the company; one query for the page's names;
    3. the reason's first line, shortened, as for the last error: reasons of failures carry the
       workflow's error, whose later lines can name hosts, paths and code;
    4. no reason at all for an event of someone outside the org (shown as `staff`): an operator's
       reason is internal (the one written for the customer is a hold's, on the org).
    """
    if staff:
        return [EventView(e.at, e.from_state, e.to_state, e.reason, e.actor) for e in events]
    names = {e.actor.removeprefix(USER_ACTOR_PREFIX) for e in events if e.actor.startswith(USER_ACTOR_PREFIX)}
    colleagues = (
        set(
            get_user_model()
            .objects.filter(memberships__org_id=org_id, username__in=names)
            .values_list("username", flat=True)
        )
        if names
        else set()
    )

    def actor(name: str) -> str:
        if name.startswith(SYSTEM_ACTOR_PREFIX):
            return name
        if name.startswith(USER_ACTOR_PREFIX) and name.removeprefix(USER_ACTOR_PREFIX) in colleagues:
            return name
        return STAFF_ACTOR

    seen = [(e, actor(e.actor)) for e in events]
    return [
        EventView(e.at, e.from_state, e.to_state, "" if who == STAFF_ACTOR else last_error_summary(e.reason), who)
        for e, who in seen
    ]


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


def backlog_finishes(*, org_id: int) -> list[Finish]:
    """The predicted finish of each of the org's unfinished charts that the plan has an ETA for
    (the band falls back to the ETA where the plan has none)."""
    rows = (
        Chart.objects.filter(org_id=org_id, state__in=ACTIVE_STATES, plan__eta__isnull=False)
        .order_by()
        .values_list("plan__eta", "plan__eta_low", "plan__eta_high")
    )
    return [Finish(eta=eta, low=low or eta, high=high or eta) for eta, low, high in rows if eta is not None]


@dataclass(frozen=True)
class OrgSummary:
    """An org as its members see it: counts of its charts per state and its predicted clear-time."""

    org: Org
    counts: dict[str, int]
    clear_at: datetime | None

    @property
    def waiting(self) -> int:
        return self.counts[ChartState.QUEUED] + self.counts[ChartState.RETRY_WAIT] + self.counts[ChartState.PAUSED]


def org_summary(*, org: Org) -> OrgSummary:
    """One grouped query over the org's charts; every state is present, zero when it has none."""
    counts = dict.fromkeys(ChartState.values, 0)
    rows = Chart.objects.filter(org=org).order_by().values_list("state").annotate(n=Count("id"))
    for state, n in rows:
        counts[state] = n
    return OrgSummary(org=org, counts=counts, clear_at=org.clear_at)
