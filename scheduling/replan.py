"""The replan pass: snapshot -> core plan -> the plan written back in bulk -> a summary broadcast."""

from __future__ import annotations

import io
import logging
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from charts.models import Chart
from fairsched.events import STAFF_GROUP, broadcast
from orgs.models import Org
from scheduling import core, metrics
from scheduling.models import QueueSample
from scheduling.snapshot import Z90, Snapshot, load_snapshot, to_datetime

logger = logging.getLogger(__name__)

SAMPLE_RETENTION_HOURS = 24
REPLAN_LOCK = 0x706C616E  # "plan"


@dataclass(frozen=True)
class ReplanResult:
    queued: int
    running: int
    ordered: int
    seconds: float
    global_clear: datetime | None


def plan_refresh(*, now: datetime | None = None) -> ReplanResult:
    """Recompute and store the fair order, predicted starts, ETAs and clear-times. Steps:

    1. Load one snapshot of the waiting and in-flight charts (`load_snapshot`, a few queries).
    2. Plan it with the core; plan it again with every duration at its p10 and p90 for the ETA band.
    3. In one transaction: write every chart's position, start, ETA and band through a temporary table
       (COPY, then one UPDATE joined on id), clear the plan of charts that left the queue meanwhile, write
       the orgs' clear-times, and keep a `QueueSample` for the plots.
    4. After commit, broadcast a summary to the live pages.
    """
    begun = time.perf_counter()
    snapshot = load_snapshot(now=now)
    plan = core.plan(snapshot.scenario)
    low = core.plan(snapshot.with_avg_scaled(-Z90)) if snapshot.sigma else plan
    high = core.plan(snapshot.with_avg_scaled(Z90)) if snapshot.sigma else plan
    with transaction.atomic():
        # Replans write the same rows; taking turns here keeps two of them from deadlocking.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [REPLAN_LOCK])
        _write_chart_plan(snapshot, plan, low, high)
        org_clear = _write_org_clear(snapshot, plan)
        _write_sample(snapshot, plan, org_clear)
    seconds = time.perf_counter() - begun
    metrics.observe_replan(seconds)
    result = ReplanResult(
        queued=len(snapshot.scenario.queued),
        running=len(snapshot.scenario.running),
        ordered=len(plan.order),
        seconds=seconds,
        global_clear=to_datetime(plan.global_clear),
    )
    transaction.on_commit(lambda: broadcast(STAFF_GROUP, {"kind": "plan", **_summary(result)}))
    return result


def _summary(result: ReplanResult) -> dict[str, object]:
    return {
        "queued": result.queued,
        "running": result.running,
        "ordered": result.ordered,
        "global_clear": result.global_clear.isoformat() if result.global_clear else None,
    }


def _write_chart_plan(snapshot: Snapshot, plan: core.Plan, low: core.Plan, high: core.Plan) -> None:
    position = {chart_id: index for index, chart_id in enumerate(plan.order)}
    buffer = io.StringIO()
    for chart_id in plan.start:
        row = (
            chart_id,
            _field(position.get(chart_id)),
            _stamp(plan.start[chart_id]),
            _stamp(plan.eta[chart_id]),
            _stamp(low.eta.get(chart_id)),
            _stamp(high.eta.get(chart_id)),
        )
        buffer.write("\t".join(row) + "\n")
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE fairsched_plan (id bigint PRIMARY KEY, position integer, predicted_start timestamptz,"
            " eta timestamptz, eta_low timestamptz, eta_high timestamptz) ON COMMIT DROP"
        )
        with cursor.connection.cursor().copy("COPY fairsched_plan FROM STDIN") as copy:
            copy.write(buffer.getvalue())
        table = Chart._meta.db_table
        cursor.execute(
            f"UPDATE {table} AS c SET position = p.position, predicted_start = p.predicted_start, eta = p.eta,"  # noqa: S608
            " eta_low = p.eta_low, eta_high = p.eta_high FROM fairsched_plan AS p WHERE c.id = p.id AND ("
            " c.position IS DISTINCT FROM p.position OR c.predicted_start IS DISTINCT FROM p.predicted_start"
            " OR c.eta IS DISTINCT FROM p.eta OR c.eta_low IS DISTINCT FROM p.eta_low"
            " OR c.eta_high IS DISTINCT FROM p.eta_high)"
        )
        # Charts that finished or were cancelled since the snapshot keep no stale plan.
        cursor.execute(
            f"UPDATE {table} AS c SET position = NULL, predicted_start = NULL, eta = NULL, eta_low = NULL,"  # noqa: S608
            " eta_high = NULL WHERE c.position IS NOT NULL AND NOT EXISTS"
            " (SELECT 1 FROM fairsched_plan AS p WHERE p.id = c.id)"
        )


def _field(value: int | None) -> str:
    return "\\N" if value is None else str(value)


def _stamp(seconds: float | None) -> str:
    moment = to_datetime(seconds)
    return "\\N" if moment is None else moment.isoformat()


def _write_org_clear(snapshot: Snapshot, plan: core.Plan) -> dict[str, datetime | None]:
    clear = {key: to_datetime(value) for key, value in plan.org_clear.items()}
    orgs = list(Org.objects.only("id", "clear_at"))
    for org in orgs:
        org.clear_at = clear.get(str(org.pk))
    Org.objects.bulk_update(orgs, ["clear_at"])
    return clear


def _write_sample(snapshot: Snapshot, plan: core.Plan, org_clear: dict[str, datetime | None]) -> None:
    scenario = snapshot.scenario
    queued = Counter(core.QueueColumns.of(scenario.queued).org)
    running = Counter(chart.org for chart in scenario.running)
    cost_in_use: Counter[str] = Counter()
    for chart in scenario.running:
        cost_in_use[chart.org] += min(chart.cost, scenario.budget)
    per_org = {
        snapshot.org_slugs.get(org, org): {
            "queued": queued[org],
            "running": running[org],
            "cost_in_use": cost_in_use[org],
            "clear_at": clear.isoformat() if (clear := org_clear.get(org)) else None,
        }
        for org in queued.keys() | running.keys()
    }
    QueueSample.objects.create(
        at=snapshot.now,
        queued=len(scenario.queued),
        running=len(scenario.running),
        budget=scenario.budget,
        cost_in_use=sum(cost_in_use.values()),
        global_clear=to_datetime(plan.global_clear),
        per_org=per_org,
    )
    QueueSample.objects.filter(at__lt=snapshot.now - timedelta(hours=SAMPLE_RETENTION_HOURS)).delete()
