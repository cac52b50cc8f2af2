"""The replan pass: snapshot -> core plan -> the plan written back in bulk -> a summary broadcast."""

from __future__ import annotations

import io
import logging
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from charts.models import ChartPlan, WaitingReason
from common.events import STAFF_GROUP, broadcast
from orgs.models import Org
from scheduling import core, metrics
from scheduling.core.waiting import Reason
from scheduling.models import QueueSample
from scheduling.snapshot import Snapshot, load_snapshot, to_datetime

logger = logging.getLogger(__name__)

SAMPLE_RETENTION_HOURS = 24
REPLAN_LOCK = 0x706C616E  # "plan"
NULL = "\\N"  # COPY's null


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
    2. Plan it with the core: order, ETAs and their p10-p90 bands, with the arrivals the snapshot
       expects (`scheduling.core.forecast`), and why each chart waits.
    3. In one transaction: replace the plan table (every chart's position, start, ETA and band, and
       why it waits: `charts.models.WaitingReason`) with one DELETE and one COPY, write the orgs'
       clear-times, and keep a `QueueSample` for the plots.
    4. After commit, broadcast a summary to the live pages.
    """
    begun = time.perf_counter()
    snapshot = load_snapshot(now=now)
    plan = core.plan(snapshot.scenario)
    with transaction.atomic():
        # Replans write the same rows; taking turns here keeps two of them from deadlocking.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [REPLAN_LOCK])
        _write_chart_plan(plan, provider_paused=snapshot.provider_paused)
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


def _write_chart_plan(plan: core.Plan, *, provider_paused: frozenset[str]) -> None:
    """Replace the whole plan table: one DELETE and one INSERT from a COPY, whatever moved.

    Every replan moves most rows (a dispatch shifts every position, time shifts the ETAs behind an
    overdue run), so a rewrite is the steady case; on a narrow table of its own it is cheap and
    leaves the chart rows alone. Times travel as epoch seconds and become timestamps in SQL, many
    times faster than formatting four datetimes per chart in Python. The core's `unavailable` is
    written as `provider_paused` for a chart a provider pause holds past its own backoff, else
    `backoff`.
    """
    position = {chart_id: index for index, chart_id in enumerate(plan.order)}
    start, eta = plan.start.as_dict(), plan.eta.as_dict()  # type: ignore[attr-defined]
    eta_low = plan.eta_low.as_dict() if plan.eta_low is not plan.eta else eta  # type: ignore[attr-defined]
    eta_high = plan.eta_high.as_dict() if plan.eta_high is not plan.eta else eta  # type: ignore[attr-defined]
    # Aligned with the plan's ids, as `start` is: read in step, no dict per column.
    waiting_columns = zip(plan.reason.column(), plan.waiting_until.column(), plan.head_of_line.column(), strict=True)
    buffer = io.StringIO()
    for (chart_id, chart_start), (waiting, until, head) in zip(start.items(), waiting_columns, strict=True):
        if waiting == Reason.UNAVAILABLE:
            waiting = WaitingReason.PROVIDER_PAUSED if chart_id in provider_paused else WaitingReason.BACKOFF
        buffer.write(
            f"{chart_id}\t{_field(position.get(chart_id))}\t{_field(chart_start)}\t{_field(eta[chart_id])}"
            f"\t{_field(eta_low.get(chart_id))}\t{_field(eta_high.get(chart_id))}\t{waiting or ''}"
            f"\t{_field(until)}\t{head or NULL}\n"
        )
    table = ChartPlan._meta.db_table
    with connection.cursor() as cursor:
        # (Dropped first: a replan inside a caller's transaction may follow another one.)
        cursor.execute("DROP TABLE IF EXISTS pg_temp.fairsched_plan_rows")
        cursor.execute(
            "CREATE TEMP TABLE fairsched_plan_rows (chart_id bigint, position integer, predicted_start float8,"
            " eta float8, eta_low float8, eta_high float8, waiting_reason text, waiting_until float8,"
            " head_of_line bigint) ON COMMIT DROP"
        )
        with cursor.connection.cursor().copy("COPY fairsched_plan_rows FROM STDIN") as copy:
            copy.write(buffer.getvalue())
        cursor.execute(f"DELETE FROM {table}")  # noqa: S608
        cursor.execute(
            f"INSERT INTO {table} (chart_id, position, predicted_start, eta, eta_low, eta_high, waiting_reason,"  # noqa: S608
            " waiting_until, head_of_line)"
            " SELECT chart_id, position, to_timestamp(predicted_start), to_timestamp(eta), to_timestamp(eta_low),"
            " to_timestamp(eta_high), waiting_reason, to_timestamp(waiting_until), head_of_line"
            " FROM fairsched_plan_rows"
        )


def _field(value: float | None) -> str:
    return NULL if value is None else repr(value)


def _write_org_clear(snapshot: Snapshot, plan: core.Plan) -> dict[str, datetime | None]:
    """Every org's clear-time with its p10-p90 band, and its virtual time raised to the round under
    way (see `snapshot.fair_service`), in one statement. GREATEST keeps a start counted meanwhile (and
    ignores a NULL round: nothing waits). Times go as epoch seconds through `to_timestamp`, like the
    charts' ETAs, so an org's clear-time is exactly its last chart's ETA."""
    clear = {key: to_datetime(value) for key, value in plan.org_clear.items()}
    keys = list(snapshot.org_slugs)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Org._meta.db_table} AS o SET clear_at = to_timestamp(v.clear_at),"  # noqa: S608
            " clear_low = to_timestamp(v.clear_low), clear_high = to_timestamp(v.clear_high),"
            " served = GREATEST(o.served, %s::float8)"
            " FROM unnest(%s::bigint[], %s::float8[], %s::float8[], %s::float8[])"
            " AS v(id, clear_at, clear_low, clear_high) WHERE o.id = v.id",
            [
                snapshot.round_under_way,
                [int(key) for key in keys],
                [_seconds(plan.org_clear.get(key)) for key in keys],
                [_seconds(plan.org_clear_low.get(key)) for key in keys],
                [_seconds(plan.org_clear_high.get(key)) for key in keys],
            ],
        )
    return clear


def _seconds(value: float | None) -> float | None:
    """A float for the driver (the core keeps whole times as ints, and arrays must be of one type)."""
    return None if value is None else float(value)


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
