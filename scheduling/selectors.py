"""Reads for the operators' dashboard. Every function here runs a fixed number of queries, whatever
the size of the queue: lists are paged in the database, and per-row extras are correlated subqueries of
the same statement (a chart's cost) or read once for the whole page (its expected duration, by the
planner's own rule), never one query per row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Aggregate, Avg, Count, F, FloatField, IntegerField, Max, Min, Q, Subquery, Sum
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from charts.models import (
    ACTIVE_STATES,
    CLAIMABLE_STATES,
    IN_FLIGHT_STATES,
    Chart,
    ChartEvent,
    ChartState,
    WaitingReason,
)
from charts.promise import AT_RISK, LATE, as_flag, at_risk_q, late_q
from charts.running import run_overdue
from common.api import etag
from knobs.models import ConfigChange, SchedulerConfig
from orgs.models import Org, OrgChange, Provider, ProviderPause, Workflow, WorkflowCost
from scheduling.accuracy import AT_ENQUEUE, AT_START
from scheduling.models import QueueSample
from scheduling.snapshot import Durations, run_cost, run_cost_expression

QUEUE_PAGE_MAX = 500
IN_FLIGHT_MAX = 500
EVENTS_MAX = 200
AT_RISK_MAX = 100
SAMPLES_MAX = 720


def _iso(value: datetime | None, timespec: str = "auto") -> str | None:
    return value.isoformat(timespec=timespec) if value is not None else None


Load = dict[tuple[int, str], tuple[int, int]]


def _waiting_words(reason: str | None) -> str:
    """A waiting reason in words (`WaitingReason`'s label); "" for none or one it does not know."""
    return WaitingReason(reason).label if reason in WaitingReason.values else ""


def active_load(*, org_id: int | None = None) -> Load:
    """(org id, state) -> (charts, cost held) over every unfinished chart: one aggregate that both
    the summary and the org rows are made of, so a page that shows both scans the charts once.
    With `org_id`, that org's charts only (an index range of `chart_active_org_state_idx`, not a scan)."""
    charts = Chart.objects.filter(state__in=ACTIVE_STATES)
    if org_id is not None:
        charts = charts.filter(org_id=org_id)
    return {
        (row_org_id, state): (n, cost or 0)
        for row_org_id, state, n, cost in charts.values("org_id", "state")
        .annotate(n=Count("id"), cost=Coalesce(Sum("cost"), 0, output_field=IntegerField()))
        .values_list("org_id", "state", "n", "cost")
    }


def summary(*, load: Load | None = None) -> dict[str, Any]:
    """Budget in use and total, policy, how many charts wait and run, the latest replan.
    Three queries (two with `load`)."""
    config = SchedulerConfig.load()
    by_state: dict[str, tuple[int, int]] = {}
    for (_, state), (n, cost) in (active_load() if load is None else load).items():
        charts, held = by_state.get(state, (0, 0))
        by_state[state] = (charts + n, held + cost)

    def count(*states: str) -> int:
        return sum(by_state.get(state, (0, 0))[0] for state in states)

    latest = QueueSample.objects.order_by("-at").values("at", "global_clear").first()
    return {
        "now": timezone.now().isoformat(),
        "budget": config.budget,
        "cost_in_use": sum(by_state.get(state, (0, 0))[1] for state in IN_FLIGHT_STATES),
        "policy": config.policy,
        "policies": [{"value": value, "label": label} for value, label in SchedulerConfig.Policy.choices],
        "quantum": config.quantum,
        "queued": count(ChartState.QUEUED),
        "retry_wait": count(ChartState.RETRY_WAIT),
        "paused": count(ChartState.PAUSED),
        "running": count(*IN_FLIGHT_STATES),
        "planned_at": _iso(latest["at"]) if latest else None,
        "global_clear": _iso(latest["global_clear"]) if latest else None,
    }


class Median(Aggregate):
    """The median of a column (PostgreSQL's `percentile_cont(0.5)`; NULLs are left out)."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


ACCURACY_WINDOW = timedelta(hours=1)


def eta_accuracy(*, window: timedelta = ACCURACY_WINDOW, now: datetime | None = None) -> dict[str, dict[str, Any]]:
    """How the promises of the charts that succeeded in the last `window` held, at enqueue and at
    start (`scheduling.accuracy`): for each, how many were scored, their median relative error and the
    share that finished inside their band (None when none was scored). One query, a range of
    `chart_finished_at_idx`."""
    now = now or timezone.now()
    aggregates: dict[str, Any] = {}
    for at in (AT_ENQUEUE, AT_START):
        error, in_band = f"eta_error_at_{at}", f"eta_in_band_at_{at}"
        aggregates[f"{at}_charts"] = Count(error)
        aggregates[f"{at}_median"] = Median(error)
        aggregates[f"{at}_in_band"] = Avg(Cast(in_band, IntegerField()))
    row = Chart.objects.filter(finished_at__gte=now - window, state=ChartState.SUCCEEDED).aggregate(**aggregates)
    return {
        at: {"charts": row[f"{at}_charts"], "median_error": row[f"{at}_median"], "in_band": row[f"{at}_in_band"]}
        for at in (AT_ENQUEUE, AT_START)
    }


def queue_page(*, start: int = 0, org: Org | None = None, offset: int = 0, limit: int = 100) -> dict[str, Any]:
    """One page of the queue in fair order. Two queries.

    Without an org the page is every waiting chart from plan position `start` on: positions are the
    dense 0-based fair order, so the page is a range scan of the plan's `chart_plan_position_idx` and a
    client can jump to any row of a 100k queue at once. With an org the page is its waiting charts in
    fair order from `offset` on. `total` sizes the client's scroller.
    """
    limit = max(1, min(limit, QUEUE_PAGE_MAX))
    planned = Chart.objects.filter(state__in=CLAIMABLE_STATES, plan__position__isnull=False)
    if org is not None:
        planned = planned.filter(org=org)
        rows = planned.order_by("plan__position")[max(0, offset) : max(0, offset) + limit]
        total = planned.count()
    else:
        rows = planned.filter(plan__position__gte=max(0, start)).order_by("plan__position")[:limit]
        # Positions are dense, so the last one sizes the scroller: one index probe, not a 100k count.
        last = planned.order_by("-plan__position").values_list("plan__position", flat=True).first()
        total = 0 if last is None else last + 1
    values = rows.annotate(
        org_slug=F("org__slug"), workflow_name=F("workflow__name"), run_cost=run_cost_expression()
    ).values(
        "id",
        "external_id",
        "position",
        "state",
        "org_slug",
        "workflow_name",
        "run_cost",
        "high_priority",
        "priority",
        "available_at",
        "predicted_start",
        "eta",
        "eta_low",
        "eta_high",
        "attempt",
        "waiting_reason",
        "waiting_until",
        "head_of_line",
    )
    return {
        "total": total,
        "start": start,
        "offset": offset,
        "rows": [
            {
                "id": row["id"],
                "external_id": row["external_id"],
                "position": row["position"],
                "state": row["state"],
                "org": row["org_slug"],
                "workflow": row["workflow_name"],
                "cost": row["run_cost"],
                "high_priority": row["high_priority"],
                "priority": row["priority"],
                "available_at": _iso(row["available_at"]),
                "predicted_start": _iso(row["predicted_start"]),
                "eta": _iso(row["eta"]),
                "eta_low": _iso(row["eta_low"]),
                "eta_high": _iso(row["eta_high"]),
                # Why it waits (`charts.models.WaitingReason`; empty: the last replan starts it now).
                "attempt": row["attempt"],
                "waiting_reason": row["waiting_reason"] or "",
                # The reason in words (its label), as the portal shows it.
                "waiting_words": _waiting_words(row["waiting_reason"]),
                "waiting_until": _iso(row["waiting_until"]),
                "head_of_line": row["head_of_line"],
            }
            for row in values
        ],
    }


def outside_plan(*, limit: int = 100) -> dict[str, Any]:
    """Waiting charts the plan leaves out: paused ones and those of held orgs, oldest first.

    Three queries. The held orgs are looked up first so that the charts are found through the
    (org, state) index of active charts rather than by joining every chart to its org.
    """
    held = list(Org.objects.filter(weight=0).values_list("id", flat=True))
    waiting = Chart.objects.filter(Q(state=ChartState.PAUSED) | Q(state__in=CLAIMABLE_STATES, org_id__in=held))
    values = (
        waiting.order_by("created_at", "id")[: max(1, min(limit, QUEUE_PAGE_MAX))]
        .annotate(org_slug=F("org__slug"), workflow_name=F("workflow__name"), run_cost=run_cost_expression())
        .values("id", "external_id", "state", "org_slug", "workflow_name", "run_cost", "high_priority", "created_at")
    )
    return {
        "total": waiting.count(),
        "rows": [
            {
                "id": row["id"],
                "external_id": row["external_id"],
                "state": row["state"],
                "held": row["state"] != ChartState.PAUSED,
                "org": row["org_slug"],
                "workflow": row["workflow_name"],
                "cost": row["run_cost"],
                "high_priority": row["high_priority"],
                "created_at": _iso(row["created_at"]),
            }
            for row in values
        ],
    }


def in_flight(*, now: datetime | None = None) -> dict[str, Any]:
    """Charts being dispatched or running, longest-running first, with elapsed and expected seconds.

    Expected is the duration the plan expects of the run (`ChartPlan.expected_duration`); for a chart
    no plan has seen in flight yet, the planner's rule (`snapshot.Durations`: the mean run of the
    chart's (org, workflow), else of its workflow, else of its org, else the default duration).
    `overdue`: it has run longer than that. Two queries, and a third for the planner's rule only when
    a chart is not in a plan yet.
    """
    now = now or timezone.now()
    durations: Durations | None = None
    charts = Chart.objects.filter(state__in=IN_FLIGHT_STATES)
    values = (
        charts.order_by(F("started_at").asc(nulls_last=True), "id")[:IN_FLIGHT_MAX]
        .annotate(
            org_slug=F("org__slug"),
            workflow_name=F("workflow__name"),
            run_cost=run_cost_expression(recorded=True),
        )
        .values(
            "id",
            "external_id",
            "state",
            "org_slug",
            "workflow_name",
            "run_cost",
            "attempt",
            "claimed_at",
            "started_at",
            "eta",
            "eta_low",
            "eta_high",
            "expected_duration",
            "org_id",
            "workflow_id",
        )
    )
    rows = []
    for row in values:
        began = row["started_at"] or row["claimed_at"]
        expected = row["expected_duration"]
        if expected is None:  # not in a plan yet: the planner's rule now
            if durations is None:  # with the runs in flight, as the planner reads them (`load_snapshot`)
                lasted: dict[tuple[int, int], list[float]] = defaultdict(list)
                for other in values:
                    if (other["started_at"] or other["claimed_at"]) is not None:
                        seconds = (now - (other["started_at"] or other["claimed_at"])).total_seconds()
                        lasted[(other["org_id"], other["workflow_id"])].append(seconds)
                durations = Durations.load(lasted=lasted)
            expected = durations.of(row["org_id"], row["workflow_id"])[0]
        rows.append(
            {
                "id": row["id"],
                "external_id": row["external_id"],
                "state": row["state"],
                "org": row["org_slug"],
                "workflow": row["workflow_name"],
                "cost": row["run_cost"],
                "attempt": row["attempt"],
                "started_at": _iso(began),
                "elapsed": (now - began).total_seconds() if began is not None else 0.0,
                "expected": expected,
                "eta": _iso(row["eta"]),
                "eta_low": _iso(row["eta_low"]),
                "eta_high": _iso(row["eta_high"]),
                "overdue": run_overdue(started_at=row["started_at"], expected_duration=expected, now=now),
            }
        )
    return {"total": charts.count(), "rows": rows}


def at_risk(*, now: datetime | None = None, limit: int = AT_RISK_MAX) -> dict[str, Any]:
    """The unfinished charts that will miss their due time or have (`charts.promise`: at risk, or
    late and not finished), earliest due first, the first `limit` of them; and per org, how many of
    each (orgs with none are left out). Two queries: the rows (down the due-time index) and the counts.

    A row: id, org, external id, workflow, state, due time, ETA, chance of finishing late (0-1;
    None when the plan has none: a late chart not yet replanned) and verdict (AT_RISK or LATE).
    """
    now = now or timezone.now()
    at_risk, late = at_risk_q(now=now), late_q(now=now) & Q(state__in=ACTIVE_STATES)
    charts = Chart.objects.filter(at_risk | late)
    values = (
        charts.annotate(org_slug=F("org__slug"), workflow_name=F("workflow__name"), is_late=as_flag(late))
        .order_by("due_at", "id")
        .values("id", "org_slug", "external_id", "workflow_name", "state", "due_at", "eta", "late_chance", "is_late")[
            :limit
        ]
    )
    rows = [
        {
            "id": row["id"],
            "org": row["org_slug"],
            "external_id": row["external_id"],
            "workflow": row["workflow_name"],
            "state": row["state"],
            "due_at": _iso(row["due_at"]),
            "eta": _iso(row["eta"]),
            "late_chance": row["late_chance"],
            "verdict": LATE if row["is_late"] else AT_RISK,
        }
        for row in values
    ]
    counts = (
        charts.order_by("org__slug")
        .values("org__slug")
        .annotate(at_risk=Count("id", filter=at_risk), late=Count("id", filter=late))
    )
    orgs = [{"org": row["org__slug"], "at_risk": row["at_risk"], "late": row["late"]} for row in counts]
    return {
        "rows": rows,
        "orgs": orgs,
        "at_risk": sum(org["at_risk"] for org in orgs),
        "late": sum(org["late"] for org in orgs),
    }


def org_rows(*, load: Load | None = None, org_id: int | None = None) -> list[dict[str, Any]]:
    """A row per org: its levers (weight, hold, cap, queue limit, cost overrides) and its load.
    Three queries (two with `load`). With `org_id`, that org's row alone, read for that org only (a
    hint about one org refreshes one row: its queries must not cost the whole table's)."""
    per_org: dict[int, dict[str, int]] = {}
    orgs = Org.objects.all()
    costs_query = WorkflowCost.objects.all()
    if org_id is not None:
        orgs = orgs.filter(pk=org_id)
        costs_query = costs_query.filter(org_id=org_id)
    for (row_org_id, state), (n, cost) in (active_load(org_id=org_id) if load is None else load).items():
        entry = per_org.setdefault(row_org_id, {"queued": 0, "paused": 0, "running": 0, "cost_in_use": 0})
        if state in IN_FLIGHT_STATES:
            entry["running"] += n
            entry["cost_in_use"] += cost
        elif state == ChartState.PAUSED:
            entry["paused"] += n
        else:
            entry["queued"] += n
    costs: dict[int, dict[str, int]] = {}
    for cost_org_id, workflow_name, cost in costs_query.values_list("org_id", "workflow__name", "cost"):
        costs.setdefault(cost_org_id, {})[workflow_name] = cost
    empty = {"queued": 0, "paused": 0, "running": 0, "cost_in_use": 0}
    return [
        {
            "id": org.pk,
            "slug": org.slug,
            "name": org.name,
            "weight": org.weight,
            "held": org.is_held,
            "hold_reason": org.hold_reason,
            "weight_before_hold": org.weight_before_hold,
            "max_concurrency": org.max_concurrency,
            "queue_limit": org.queue_limit,
            # To the second: a clear-time is hours off, and the table has three a row.
            "clear_at": _iso(org.clear_at, "seconds"),
            "clear_low": _iso(org.clear_low, "seconds"),
            "clear_high": _iso(org.clear_high, "seconds"),
            "costs": costs.get(org.pk, {}),
            # The ETag the org's API read answers: the editor's edits send it back (If-Match).
            "etag": etag(org),
            **per_org.get(org.pk, empty),
        }
        for org in orgs
    ]


def workflows() -> list[dict[str, Any]]:
    """Each workflow's name and default cost (the org rows' cost levers). One query."""
    return [{"name": name, "default_cost": cost} for name, cost in Workflow.objects.values_list("name", "default_cost")]


def workflows_and_providers(*, now: datetime | None = None) -> dict[str, Any]:
    """The workflows (for cost levers) and the providers with their current pauses. Three queries."""
    now = now or timezone.now()
    pauses: dict[int, list[dict[str, Any]]] = {}
    for pause in ProviderPause.objects.filter(until__gt=now).select_related("org").order_by("until"):
        pauses.setdefault(pause.provider_id, []).append(
            {
                "org": pause.org.slug if pause.org is not None else None,
                "until": _iso(pause.until),
                "reason": pause.reason,
                "by": pause.created_by,
            }
        )
    return {
        "workflows": workflows(),
        "providers": [
            {"slug": provider.slug, "name": provider.name, "pauses": pauses.get(provider.pk, [])}
            for provider in Provider.objects.all()
        ],
    }


def _chart_event_groups(*, limit: int) -> list[dict[str, Any]]:
    """The newest chart transitions, those of one transaction alike (org, actor, change, reason) as
    one group with its count: a bulk of 100 submissions is one line, not 100. Over the transactions of
    the newest `limit` events, so each group's count is whole. One query."""
    newest = ChartEvent.objects.order_by("-at", "-id").values("txid")[:limit]
    return list(
        ChartEvent.objects.filter(txid__in=Subquery(newest))
        .values("txid", "actor", "from_state", "to_state", "reason", org=F("chart__org__slug"))
        .annotate(at=Max("at"), count=Count("id"), first=Min("chart__external_id"), last=Max("chart__external_id"))
        .order_by("-at", "-txid")[:limit]
    )


def _chart_events_text(group: dict[str, Any]) -> str:
    change = f"{group['from_state'] or 'new'} → {group['to_state']}"
    if group["count"] == 1:
        return f"{group['first']}: {change}"
    return f"{group['count']} charts ({group['first']} … {group['last']}): {change}"


def recent_events(*, limit: int = 50) -> list[dict[str, Any]]:
    """The newest chart transitions (a transaction's alike as one line with its count), org changes
    and configuration changes, merged, newest first. Three queries."""
    limit = max(1, min(limit, EVENTS_MAX))
    events: list[dict[str, Any]] = [
        {
            "at": group["at"],
            "kind": "chart",
            "actor": group["actor"],
            "org": group["org"],
            "text": _chart_events_text(group),
            "reason": group["reason"],
            "count": group["count"],
        }
        for group in _chart_event_groups(limit=limit)
    ]
    events += [
        {
            "at": change.at,
            "kind": "org",
            "actor": change.actor,
            "org": change.org.slug,
            "text": f"{change.field}: {change.old_value or '—'} → {change.new_value or '—'}",
            "reason": change.reason,
        }
        for change in OrgChange.objects.select_related("org").order_by("-at", "-id")[:limit]
    ]
    events += [
        {
            "at": change.at,
            "kind": "config",
            "actor": change.actor,
            "org": None,
            "text": f"{change.field}: {change.old_value} → {change.new_value}",
            "reason": change.reason,
        }
        for change in ConfigChange.objects.order_by("-at", "-id")[:limit]
    ]
    events.sort(key=lambda event: event["at"], reverse=True)
    return [{**event, "at": _iso(event["at"])} for event in events[:limit]]


def queue_samples(*, window: timedelta = timedelta(hours=1), now: datetime | None = None) -> list[dict[str, Any]]:
    """The queue's history over the last `window`, oldest first, at most SAMPLES_MAX points. One query."""
    now = now or timezone.now()
    newest = (
        QueueSample.objects.filter(at__gte=now - window)
        .order_by("-at")
        .values("at", "queued", "running", "budget", "cost_in_use", "global_clear")[:SAMPLES_MAX]
    )
    return [
        {**sample, "at": _iso(sample["at"]), "global_clear": _iso(sample["global_clear"])}
        for sample in reversed(list(newest))
    ]


@dataclass(frozen=True)
class WorkflowTerms:
    """What a workflow means for one org: what a run costs it and how long a run is expected to take.

    `org` is None for a caller of no particular org (staff, a member of several orgs who named
    none): the workflow's default cost and its expected duration over every org.
    """

    workflow: Workflow
    org: Org | None
    cost: int
    expected_duration: float


def workflow_terms(*, workflows: Sequence[Workflow], org: Org | None) -> list[WorkflowTerms]:
    """The terms of `workflows` for `org`, in two queries whatever their number.

    1. The org's cost overrides of these workflows; a workflow without one costs its default
       (`snapshot.run_cost`).
    2. The duration statistics that the ETAs' fallback chain needs for them (`snapshot.Durations`):
       the (org, workflow) runs, then the workflow's over every org, then its initial duration,
       then the org's, then the configured default.
    """
    ids = [workflow.pk for workflow in workflows]
    if not ids:
        return []
    org_id = org.pk if org is not None else None
    overrides = (
        dict(WorkflowCost.objects.filter(org_id=org_id, workflow_id__in=ids).values_list("workflow_id", "cost"))
        if org_id is not None
        else {}
    )
    initial = {workflow.pk: workflow.initial_duration for workflow in workflows if workflow.initial_duration}
    durations = Durations.load(org_id=org_id, workflow_ids=ids, initial=initial)
    return [
        WorkflowTerms(
            workflow=workflow,
            org=org,
            cost=run_cost(override=overrides.get(workflow.pk), default=workflow.default_cost),
            expected_duration=durations.of(org_id, workflow.pk)[0],
        )
        for workflow in workflows
    ]
