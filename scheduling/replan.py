"""The replan pass: snapshot -> core plan -> the plan written back in bulk -> a summary broadcast."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from numpy.typing import NDArray
from psycopg.copy import QueuedLibpqWriter

from charts.models import ChartPlan, ChartPromise
from common.events import STAFF_GROUP, broadcast, pass_done
from orgs.models import Org
from scheduling import copy_binary, core, metrics
from scheduling.core.dispatcher import UNAVAILABLE
from scheduling.core.model import PlanArrays
from scheduling.models import ClearTimeSlip, QueueSample
from scheduling.reasons import waiting_reason
from scheduling.snapshot import Snapshot, load_snapshot, org_key, to_datetime, to_seconds
from scheduling.what_if import base_hand_over, levers_version

logger = logging.getLogger(__name__)

SAMPLE_RETENTION_HOURS = 24
REPLAN_LOCK = 0x706C616E  # "plan"


@dataclass(frozen=True)
class ReplanResult:
    queued: int
    running: int
    ordered: int
    seconds: float  # the whole pass; of which:
    load_seconds: float  # reading the snapshot
    plan_seconds: float  # the core's plan, why each chart waits included (the rest: writing it)
    global_clear: datetime | None


def plan_refresh(*, now: datetime | None = None) -> ReplanResult:
    """Recompute and store the fair order, predicted starts, ETAs and clear-times. Steps:

    1. Load one snapshot of the waiting and in-flight charts (`load_snapshot`, a few queries).
    2. Plan it with the core: order, ETAs and their p10-p90 bands, with the arrivals the snapshot
       expects (`scheduling.core.forecast`), and why each chart waits.
    3. In one transaction: build the next plan table aside (every chart's position, start, ETA and
       band, and why it waits: `charts.models.WaitingReason`; an in-flight chart's expected duration),
       write the orgs' clear-times (and a `ClearTimeSlip` for each that slipped: `_record_slips`),
       record the first plan of the charts no replan has planned yet (`_record_first_plans`), keep a
       `QueueSample` for the plots, and swap the next plan table in for the plan table (`write_plan`:
       `_build_next_plan`, `_swap_in_next_plan`).
    4. After commit, hand the snapshot and the plan over to the what-if as the base of the plan version
       this replan makes (`scheduling.what_if.base_hand_over`), then broadcast a summary to the live pages.
    """
    begun = time.perf_counter()
    levers = levers_version()  # before the snapshot: a lever pulled while it is read is a later version
    snapshot = load_snapshot(now=now)
    loaded = time.perf_counter()
    plan = core.plan(snapshot.scenario)
    plan.reason.column()  # the core works out why charts wait on first use: time it as the plan's
    planned = time.perf_counter()
    sample = write_plan(snapshot, plan)
    seconds = time.perf_counter() - begun
    metrics.observe_replan(seconds)
    result = ReplanResult(
        queued=len(snapshot.scenario.queued),
        running=len(snapshot.scenario.running),
        ordered=len(plan.order),
        seconds=seconds,
        load_seconds=loaded - begun,
        plan_seconds=planned - loaded,
        global_clear=to_datetime(plan.global_clear),
    )
    # The base first: the live pages that hear of the plan may preview it at once.
    transaction.on_commit(lambda: base_hand_over(version=(sample.pk, *levers), snapshot=snapshot, plan=plan))
    transaction.on_commit(lambda: broadcast(STAFF_GROUP, {"kind": "plan", **_summary(result)}))
    pass_done(kind="plan")
    return result


def write_plan(snapshot: Snapshot, plan: core.Plan) -> QueueSample:
    """Step 3 of `plan_refresh`: in one transaction, build the next plan table, write the orgs'
    clear-times, the first plans of new charts and a `QueueSample` (returned), and swap the next plan
    table in."""
    with transaction.atomic():
        # Replans write the same rows; taking turns here keeps two of them from deadlocking.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [REPLAN_LOCK])
        indexes = _build_next_plan(snapshot, plan)
        org_clear = _write_org_clear(snapshot, plan)
        _record_first_plans(snapshot)
        sample = _write_sample(snapshot, plan, org_clear)
        _swap_in_next_plan(indexes)  # last: it locks the plan table until the commit
    return sample


def _summary(result: ReplanResult) -> dict[str, object]:
    return {
        "queued": result.queued,
        "running": result.running,
        "ordered": result.ordered,
        "global_clear": result.global_clear.isoformat() if result.global_clear else None,
    }


PLAN_TABLE = ChartPlan._meta.db_table
NEXT_PLAN_TABLE = f"{PLAN_TABLE}_next"


def _build_next_plan(snapshot: Snapshot, plan: core.Plan) -> list[PlanIndex]:
    """Build the next plan table aside, holding this plan, and return the plan table's indexes that
    it was given. Steps:

    1. Create the next table like the plan table (columns, defaults, checks; no indexes), unlogged.
    2. COPY the rows in, frozen (the table is new in this transaction): no reader has to set hint bits
       on them and vacuum has nothing to freeze. The rows go as a binary stream
       (`scheduling.copy_binary`: times in PostgreSQL's own form, nothing formatted) encoded a block
       at a time (`_plan_rows`) and handed to a writer thread (psycopg's `QueuedLibpqWriter`), so
       that this process encodes the next block while the server parses the last one, each on a
       core of its own, where with a plain write they took turns.
    3. Build each index of the plan table on it (read from the catalog, so a migration that adds one
       is followed), each in one sort in memory: `maintenance_work_mem` is raised for this
       transaction to what the plan's rows need (`SORT_BYTES_PER_ROW`). The server's default, 64 MB,
       holds the sort of about a million rows; past that, or shared among a parallel build's
       processes (each takes its share), a sort spills to disk.

    Why a new table and not a diff: between two replans nearly every row changes (a dispatch shifts
    every position, time shifts every ETA behind a free or overdue slot), and an UPDATE of 100k rows
    costs several times the COPY and index builds of a fresh table (see `bench/bench_replan.py`).
    Nobody else reads or locks the next table, so building it holds up no reader, transition or claim.

    Why unlogged: the plan is derived data, rebuilt whole by every replan, and writing it to the WAL
    (every row, then every index page again) was a third of the persist's time (issue 17,
    `bench/bench_replan.py`). The price: a crash of the PostgreSQL server (not of a replan, whose
    transaction just rolls back, leaving the old plan) empties the table; until the next replan,
    at most `SchedulerConfig.replan_interval` later, charts show no plan and dispatch waits. Nor is an
    unlogged table on a streaming replica: the plan is read from the primary.
    """
    blocks = _plan_rows(snapshot, plan)
    columns = PLAN_COLUMNS + DUE_COLUMNS if plan.due_times else PLAN_COLUMNS
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.relname, pg_get_indexdef(x.indexrelid), x.indisunique, c.contype"
            " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
            " LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.conrelid = x.indrelid"
            " WHERE x.indrelid = %s::regclass",
            [PLAN_TABLE],
        )
        indexes = [PlanIndex(*row) for row in cursor.fetchall()]
        cursor.execute(
            f"CREATE UNLOGGED TABLE {NEXT_PLAN_TABLE} (LIKE {PLAN_TABLE} INCLUDING ALL EXCLUDING INDEXES)"
            # It lives until the next replan: nothing for autovacuum to do but collide with the swap.
            " WITH (autovacuum_enabled = false)"
        )
        raw = cursor.connection.cursor()
        with raw.copy(
            f"COPY {NEXT_PLAN_TABLE} ({', '.join(columns)}) FROM STDIN (FORMAT binary, FREEZE)",
            writer=QueuedLibpqWriter(raw),
        ) as copy:
            for chunk in copy_binary.chunks([block[name] for name in columns] for block in blocks):
                copy.write(chunk)
        cursor.execute(  # (in kB; never lowered)
            "SELECT set_config('maintenance_work_mem',"
            " GREATEST(pg_size_bytes(current_setting('maintenance_work_mem')) / 1024, %s)::text, true)",
            [len(plan.start) * SORT_BYTES_PER_ROW // 1024],
        )
        for index in indexes:
            cursor.execute(index.create_on(NEXT_PLAN_TABLE))
            if index.constraint:
                cursor.execute(f"ALTER TABLE {NEXT_PLAN_TABLE} ADD {index.constraint} USING INDEX {index.built}")
    return indexes


def _swap_in_next_plan(indexes: list[PlanIndex]) -> None:
    """Drop the plan table and give the next table its name and its indexes' names.

    Readers never see a half-written plan: the swap is part of the replan's transaction, so they read
    the old table until it commits and the new one after. The drop takes the plan table's exclusive
    lock, last thing before the commit: it waits for the readers already running (the longest is a
    metrics scrape counting the plan's reasons), new readers wait behind it, then for the renames
    (milliseconds). A transition's `_leave_plan` that waits for that lock goes on against the new
    table; one that committed while this plan was computed is overwritten with this plan's row for
    its chart, as a rewrite always did: readers go by the chart's state, and the next replan settles it.
    """
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {PLAN_TABLE}")
        cursor.execute(f"ALTER TABLE {NEXT_PLAN_TABLE} RENAME TO {PLAN_TABLE}")
        for index in indexes:
            # (An index that backs a constraint renames the constraint with it.)
            cursor.execute(f"ALTER INDEX {index.built} RENAME TO {index.name}")


@dataclass(frozen=True)
class PlanIndex:
    """An index of the plan table as the catalog describes it, to build again on the next table."""

    name: str
    definition: str  # pg_get_indexdef: CREATE [UNIQUE] INDEX name ON table USING method (columns) ...
    unique: bool
    constraint_type: str | None  # p: it backs the primary key, u: a unique constraint, None: neither

    @property
    def built(self) -> str:
        return f"{self.name}_next"

    @property
    def constraint(self) -> str:
        return {"p": "PRIMARY KEY", "u": "UNIQUE"}.get(self.constraint_type or "", "")

    def create_on(self, table: str) -> str:
        method_and_columns = self.definition.split(" USING ", 1)[1]
        unique = "UNIQUE " if self.unique else ""
        return f"CREATE {unique}INDEX {self.built} ON {table} USING {method_and_columns}"


# The plan table's columns in the order of the COPY, and the rows encoded at a time (6 MB of stream:
# the server reads one block while the next is encoded, and a block's arrays stay in the caches).
PLAN_COLUMNS = (
    "chart_id", "position", "predicted_start", "eta", "eta_low", "eta_high", "waiting_reason", "waiting_until",
    "head_of_line", "expected_duration",
)  # fmt: skip
# Written only when some chart has a due time (`core.Plan.due_times`): else NULL, the column's default.
DUE_COLUMNS = ("late_chance",)
PLAN_BLOCK_ROWS = 65_536
# What an index build's sort takes per row: 65 bytes measured (trace_sort: 63,639 kB for a million
# rows of the bigint and of the integer index alike), and a margin.
SORT_BYTES_PER_ROW = 96


def _plan_rows(snapshot: Snapshot, plan: core.Plan) -> Iterator[dict[str, copy_binary.Column]]:
    """The plan as the plan table's columns (`PLAN_COLUMNS`), in blocks of `PLAN_BLOCK_ROWS` rows,
    each worked out when the COPY asks for it. The rows are the plan's arrays (`PlanArrays`):
    the charts of the order first, in order, so their places are 0, 1, 2, ... and the rest have
    none; each chart's id is the snapshot's, gathered by the plan's indices into the queue (no key
    read back from its digits). The core's lists (why each chart waits) are read a block at a time.
    The expected duration is the in-flight charts' own (the scenario's `avg`), NULL for the rest;
    the chance of finishing late (`DUE_COLUMNS`) only when some chart has a due time."""
    _check_aligned(snapshot)
    arrays = plan.arrays
    ids = np.concatenate((snapshot.waiting.id[arrays.queued], snapshot.in_flight.id))
    places = np.arange(len(ids), dtype=np.int64)
    positions = copy_binary.Column("int4", places, places >= len(plan.order))
    provider_paused = np.concatenate(
        (snapshot.provider_paused[arrays.queued], np.zeros(len(snapshot.in_flight.id), bool))
    )
    reasons = _reasons(plan, provider_paused)
    until, head = plan.waiting_until.column(), plan.head_of_line.column()
    running_avg = [chart.avg for chart in snapshot.scenario.running]
    expected = copy_binary.floats(np.concatenate((np.full(len(ids) - len(running_avg), np.nan), running_avg)))
    for begin in range(0, len(ids), PLAN_BLOCK_ROWS):
        block = slice(begin, begin + PLAN_BLOCK_ROWS)
        yield {
            "chart_id": copy_binary.Column("int8", ids[block]),
            "position": positions.rows(block),
            **_time_columns(arrays, block),
            "waiting_reason": copy_binary.texts(reasons[block]),
            "waiting_until": copy_binary.timestamps(until[block]),
            "head_of_line": _chart_id_column(head[block]),
            "expected_duration": expected.rows(block),
            **({"late_chance": copy_binary.floats(arrays.late_chance[block])} if plan.due_times else {}),
        }


def _check_aligned(snapshot: Snapshot) -> None:
    """Refuse a snapshot whose rows are not its scenario's charts: the ids written are the rows', by
    the plan's places in the scenario, so a scenario filtered or reordered after the load would put
    one chart's plan under another's id. Every chart is checked, id by id (the core keys a chart by
    its primary key)."""
    for rows, ids, name in (
        (snapshot.waiting.id, core.QueueColumns.of(snapshot.scenario.queued).given("id"), "queued"),
        (snapshot.in_flight.id, [chart.id for chart in snapshot.scenario.running], "running"),
    ):
        if len(rows) != len(ids) or not np.array_equal(rows, np.asarray(ids)):
            raise ValueError(f"the snapshot's {name} rows are not its scenario's {name} charts, in order")


def _time_columns(arrays: PlanArrays, block: slice) -> dict[str, copy_binary.Column]:
    """The predicted start, ETA and band of the charts of `block` (a plan without spreads has its
    ETAs as its band)."""
    eta = copy_binary.timestamps(arrays.eta[block])
    return {
        "predicted_start": copy_binary.timestamps(arrays.start[block]),
        "eta": eta,
        "eta_low": eta if arrays.eta_low is arrays.eta else copy_binary.timestamps(arrays.eta_low[block]),
        "eta_high": eta if arrays.eta_high is arrays.eta else copy_binary.timestamps(arrays.eta_high[block]),
    }


def _reasons(plan: core.Plan, provider_paused: NDArray[np.bool_]) -> Sequence[str | None]:
    """Why each chart waits (None: it does not). The core's `unavailable` is written as
    `provider_paused` for a chart a provider pause holds past its own backoff (`provider_paused`,
    aligned with the plan's rows), else `backoff`."""
    reasons = plan.reason.column()
    if UNAVAILABLE.value not in reasons:  # (a plain string: compared at C speed)
        return reasons
    return [
        waiting_reason(UNAVAILABLE, provider_paused=paused) if reason == UNAVAILABLE else reason
        for reason, paused in zip(reasons, provider_paused.tolist(), strict=True)
    ]


def _chart_id_column(ids: Sequence[core.ChartId | None]) -> copy_binary.Column:
    """Chart ids (the core's keys, the primary keys themselves), None as NULL (the usual case: a
    head of line is named only for the charts the budget would hold now)."""
    if ids.count(None) == len(ids):  # (counted in C)
        return copy_binary.Column("int8", np.zeros(len(ids), dtype=np.int64), np.ones(len(ids), dtype=np.bool_))
    present = np.array(ids, dtype=object)
    null = present == None  # noqa: E711 (each element compared)
    present[null] = 0
    return copy_binary.Column("int8", present.astype(np.int64), null)


def _write_org_clear(snapshot: Snapshot, plan: core.Plan) -> dict[str, datetime | None]:
    """Every org's clear-time with its p10-p90 band, and its virtual time raised to the round under
    way (see `snapshot.fair_service`), in one statement. GREATEST keeps a start counted meanwhile (and
    ignores a NULL round: nothing waits). Times go as epoch seconds through `to_timestamp`, like the
    charts' ETAs, so an org's clear-time is exactly its last chart's ETA."""
    clear = {key: to_datetime(value) for key, value in plan.org_clear.items()}
    keys = list(snapshot.org_slugs)
    table = Org._meta.db_table
    with connection.cursor() as cursor:
        # `before` is the same row as the statement found it: RETURNING gives the clear-time replaced.
        cursor.execute(
            f"UPDATE {table} AS o SET clear_at = to_timestamp(v.clear_at),"  # noqa: S608
            " clear_low = to_timestamp(v.clear_low), clear_high = to_timestamp(v.clear_high),"
            " served = GREATEST(o.served, %s::float8)"
            " FROM unnest(%s::bigint[], %s::float8[], %s::float8[], %s::float8[])"
            f" AS v(id, clear_at, clear_low, clear_high), {table} AS before"
            " WHERE o.id = v.id AND before.id = o.id"
            " RETURNING o.id, before.clear_at, o.clear_at",
            [
                snapshot.round_under_way,
                [int(key) for key in keys],
                [_seconds(plan.org_clear.get(key)) for key in keys],
                [_seconds(plan.org_clear_low.get(key)) for key in keys],
                [_seconds(plan.org_clear_high.get(key)) for key in keys],
            ],
        )
        replaced = cursor.fetchall()
    _record_slips(snapshot.now, replaced)
    return clear


def _record_first_plans(snapshot: Snapshot) -> None:
    """Record the plan this replan made for each waiting chart that no replan had planned yet: its
    first plan after its submission, the ETA and band it was promised at enqueue, which its finish
    is measured against (`charts.models.ChartPromise`, `scheduling.accuracy`), and when that plan was
    made; also for a chart the plan gives no ETA (held, paused): a chart is recorded once either way.
    Steps:

    1. The candidates: the waiting charts submitted since the previous replan's instant (the last
       `QueueSample`), less `FIRST_PLAN_MARGIN` for the submissions that committed after that
       replan read the queue; every waiting chart when there was none. A chart the previous replans
       already recorded is among them only while it is that recent.
    2. One INSERT of their rows of the next plan table (built by now) into the promises; a chart that
       has one keeps it (ON CONFLICT DO NOTHING).
    So a replan writes rows in proportion to the submissions since the last one, into a narrow table
    of its own: nothing of the chart rows (see `ChartPromise`), no lock on them.
    """
    waiting = snapshot.waiting
    previous = QueueSample.objects.order_by("-at").values_list("at", flat=True).first()
    if previous is None:
        candidates = waiting.id
    else:
        since = to_seconds(previous - FIRST_PLAN_MARGIN)
        candidates = waiting.id[waiting.created >= since]
    if not len(candidates):
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ChartPromise._meta.db_table} (chart_id, planned_at, eta, eta_low, eta_high)"  # noqa: S608
            f" SELECT p.chart_id, %s, p.eta, p.eta_low, p.eta_high FROM {NEXT_PLAN_TABLE} AS p"
            " WHERE p.chart_id = ANY(%s) ON CONFLICT (chart_id) DO NOTHING",
            [snapshot.now, candidates.tolist()],
        )


# How long before the previous replan's instant a submission still counts as possibly unseen by it
# (`_record_first_plans`): longer than a submission's transaction takes from its `created_at` to its
# commit (a bulk of 10,000 charts commits within seconds).
FIRST_PLAN_MARGIN = timedelta(minutes=1)


def _record_slips(now: datetime, replaced: Sequence[tuple[int, datetime | None, datetime | None]]) -> None:
    """Record a `ClearTimeSlip` for each org whose clear-time this replan moved later than the last one
    predicted by more than `FAIRSCHED_FEED_SLIP_SHARE` of the wait then predicted (and by at least
    `FAIRSCHED_FEED_SLIP_MIN_SECONDS`): the change feed's `org.clear_time_slipped`. Compared with the
    previous replan only, so a drift of a few seconds at every replan is not a slip."""
    share = settings.FAIRSCHED_FEED_SLIP_SHARE
    least = timedelta(seconds=settings.FAIRSCHED_FEED_SLIP_MIN_SECONDS)
    slips = [
        ClearTimeSlip(org_id=org_id, clear_before=before, clear_at=after, at=now)
        for org_id, before, after in replaced
        if before is not None
        and after is not None
        and after - before >= least
        and (after - before) > share * max(before - now, timedelta(0))
    ]
    if slips:
        ClearTimeSlip.objects.bulk_create(slips)


def _seconds(value: float | None) -> float | None:
    """A float for the driver (the core keeps whole times as ints, and arrays must be of one type)."""
    return None if value is None else float(value)


def _write_sample(snapshot: Snapshot, plan: core.Plan, org_clear: dict[str, datetime | None]) -> QueueSample:
    scenario = snapshot.scenario
    org_ids, counts = np.unique(snapshot.waiting.org_id, return_counts=True)
    queued = Counter(dict(zip(map(org_key, org_ids.tolist()), counts.tolist(), strict=True)))
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
    sample = QueueSample.objects.create(
        at=snapshot.now,
        queued=len(scenario.queued),
        running=len(scenario.running),
        budget=scenario.budget,
        cost_in_use=sum(cost_in_use.values()),
        global_clear=to_datetime(plan.global_clear),
        per_org=per_org,
    )
    QueueSample.objects.filter(at__lt=snapshot.now - timedelta(hours=SAMPLE_RETENTION_HOURS)).delete()
    return sample
