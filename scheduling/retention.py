"""The retention pass: finished charts older than `FAIRSCHED_RETENTION_DAYS` leave the database.

What goes: a chart that succeeded, failed or was cancelled and whose `finished_at` is older than the
retention (every terminal transition sets it; `chart_finished_at_idx` serves the walk), with its
events (`ChartEvent`) and its promise at enqueue (`ChartPromise`). What stays:
- every chart not finished, whatever its age, and a cancelled chart whose workflow may still run
  (`cancel_requested_at` set: reconcile still watches it, `reconcile.close_cancelled`);
- what the ETAs, metrics and reports need: the learned durations (`DurationStat`, rows of their
  own), the queue samples, the orgs' and the configuration's change logs;
- webhook deliveries: they name an event by its feed id, not by a foreign key to the chart.
- The plan table is not touched: a finished chart leaves it at its transition, and each replan
  rebuilds it whole from the waiting and in-flight charts (a DELETE there would also hold up the
  replan's swap, which takes that table's exclusive lock).

How it stays out of the passes' way: one batch of at most `BATCH_SIZE` charts per transaction,
chosen by key range on (finished_at, id) with `FOR UPDATE SKIP LOCKED` (a row someone holds is left
for the next run), never the plan table; before each batch it waits while the dispatcher or a replan
holds its advisory lock, and rests between batches as long as the batch took (`BATCH_REST_SHARE`);
a run ends after `RUN_MAX_CHARTS` charts or `RUN_MAX_SECONDS`, and the next run (beat asks every
`RUN_INTERVAL` seconds) goes on.
Short transactions matter for the change feed too: it serves only rows of ended transactions, so an
open one would hold it back.

The export (`FAIRSCHED_RETENTION_EXPORT_DIR`): one gzip file of JSON lines per batch, one line per
chart (`{"chart": {...}, "events": [...], "promise": {...} | null}`, every column, times in ISO 8601
with microseconds), written under a temporary name, fsynced, then linked to a name that no other
batch has (the time of the export and the batch's id range; a link never replaces a file) and the
directory fsynced, all before the batch's DELETE, in the transaction that holds the batch's rows. A
run that dies after the export and before the commit deletes nothing; the next run exports those
charts again, to a new file: a chart may then be in two files, identical, never in none.
"""

from __future__ import annotations

import gzip
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from charts.models import TERMINAL_STATES, Chart, ChartEvent, ChartPromise
from scheduling.dispatch import DISPATCH_LOCK, advisory_lock
from scheduling.replan import REPLAN_LOCK

logger = logging.getLogger(__name__)

RETENTION_LOCK = 0x7072756E  # "prun": one retention run at a time
BATCH_SIZE = 2_000
RUN_MAX_CHARTS = 50_000
RUN_MAX_SECONDS = 10.0  # a run holds a pool child of the worker, which the passes share
# Seconds between runs (scheduling.tasks.tick), while there is something to do. A run is busy half its
# RUN_MAX_SECONDS (BATCH_REST_SHARE), so ~4% of the time: the passes' p95 stays within 10% (at 60 s,
# ~8%, the replan's rose 12%); still ~417 charts a second, 36M a day. bench/bench_retention.py.
RUN_INTERVAL = 120.0
BATCH_PAUSE_SECONDS = 0.02  # between two batches at least: the passes' queries get the CPU and the disk
# And as long as this share of the batch's own time: a batch keeps a core busy (its PostgreSQL backend
# and this process take turns), so at 1.0 the prune takes half a core at most, whatever the machine.
BATCH_REST_SHARE = 1.0
PASS_WAIT_SECONDS = 0.05  # how often to look again while a pass holds its lock
PASS_LOCKS = (DISPATCH_LOCK, REPLAN_LOCK)

CHART_TABLE = Chart._meta.db_table
EVENT_TABLE = ChartEvent._meta.db_table
PROMISE_TABLE = ChartPromise._meta.db_table


@dataclass
class RetentionResult:
    locked: bool = True  # False: another run held the retention lock, nothing was done
    deleted: int = 0  # charts
    events: int = 0
    batches: int = 0
    pauses: int = 0  # looks again while a pass held its lock
    files: list[Path] = field(default_factory=list)
    finished: bool = False  # True: nothing older than the retention is left (bar rows someone held)


@dataclass(frozen=True)
class Batch:
    ids: list[int]
    last: tuple[datetime, int]  # the key (finished_at, id) the next batch starts after
    events: int
    file: Path | None


def retention_cutoff(now: datetime | None = None) -> datetime | None:
    """Charts that finished before this go; None when the retention keeps everything (0 days)."""
    days = settings.FAIRSCHED_RETENTION_DAYS
    if not days:
        return None
    return (now or timezone.now()) - timedelta(days=days)


def retention_run(
    *,
    now: datetime | None = None,
    batch_size: int = BATCH_SIZE,
    max_charts: int = RUN_MAX_CHARTS,
    max_seconds: float = RUN_MAX_SECONDS,
    pause: float = BATCH_PAUSE_SECONDS,
    rest: float = BATCH_REST_SHARE,
    sleep: Callable[[float], None] = time.sleep,
) -> RetentionResult:
    """Delete (and first export, if set) the finished charts older than the retention. Steps:

    1. Nothing to do when the retention is 0; take the retention lock, or return if a run holds it.
    2. Until `max_charts` charts are gone or `max_seconds` have passed:
       a. wait while the dispatcher or a replan holds its advisory lock (`_wait_for_passes`);
       b. in one transaction, lock the next batch by key range, skipping locked rows, export it
          (written and fsynced) and delete its events, promises and charts (`_prune_batch`);
       c. stop when no batch is left, else rest (`pause`, or `rest` times the batch's own time if
          longer) and go on after the batch's last key.
    """
    result = RetentionResult()
    cutoff = retention_cutoff(now)
    if cutoff is None:
        result.finished = True
        return result
    export_dir = Path(settings.FAIRSCHED_RETENTION_EXPORT_DIR) if settings.FAIRSCHED_RETENTION_EXPORT_DIR else None
    if export_dir is not None:
        export_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + max_seconds
    after: tuple[datetime, int] | None = None
    with advisory_lock(RETENTION_LOCK) as locked:
        if not locked:
            result.locked = False
            return result
        while result.deleted < max_charts:
            if not _wait_for_passes(deadline=deadline, sleep=sleep, result=result):
                break
            began = time.monotonic()
            batch = _prune_batch(
                cutoff=cutoff, after=after, limit=min(batch_size, max_charts - result.deleted), export_dir=export_dir
            )
            took = time.monotonic() - began
            if batch is None:
                result.finished = True
                break
            result.batches += 1
            result.deleted += len(batch.ids)
            result.events += batch.events
            if batch.file is not None:
                result.files.append(batch.file)
            after = batch.last
            if time.monotonic() >= deadline:
                break
            sleep(max(pause, took * rest))
    if result.deleted:
        logger.info(
            "retention: deleted %d finished charts and %d events in %d batches (before %s)%s",
            result.deleted, result.events, result.batches, cutoff.isoformat(),
            "" if result.finished else "; more left for the next run",
        )  # fmt: skip
    return result


def _wait_for_passes(*, deadline: float, sleep: Callable[[float], None], result: RetentionResult) -> bool:
    """Wait while another session holds the dispatcher's or the replan's advisory lock (a pass is
    running: it goes first); False if the run's time is up meanwhile."""
    while _pass_running():
        if time.monotonic() >= deadline:
            return False
        result.pauses += 1
        sleep(PASS_WAIT_SECONDS)
    return True


def _pass_running() -> bool:
    """Whether another session holds one of the passes' advisory locks (a bigint key below 2^32 is
    (classid 0, objid key, objsubid 1) in `pg_locks`)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = 0 AND objsubid = 1 AND objid::bigint = ANY(%s) AND pid <> pg_backend_pid())",
            [list(PASS_LOCKS)],
        )
        return bool(cursor.fetchone()[0])


def _prune_batch(
    *, cutoff: datetime, after: tuple[datetime, int] | None, limit: int, export_dir: Path | None
) -> Batch | None:
    """One batch in one transaction: lock the next `limit` finished charts older than `cutoff` after
    the key `after` (SKIP LOCKED: never wait for a row), export them, delete them; None if none is left.

    The chart table is read directly, not through `Chart.objects`, whose plan join would lock the plan
    table against the replan's swap for the batch's whole transaction."""
    key = "AND (finished_at, id) > (%s, %s)" if after is not None else ""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, finished_at FROM {CHART_TABLE}"  # noqa: S608
            " WHERE finished_at < %s AND state = ANY(%s) AND cancel_requested_at IS NULL"
            f" {key} ORDER BY finished_at, id LIMIT %s FOR UPDATE SKIP LOCKED",
            [cutoff, [str(state) for state in TERMINAL_STATES], *(after or ()), limit],
        )
        rows = cursor.fetchall()
        if not rows:
            return None
        ids = [row[0] for row in rows]
        file = _export(ids, export_dir) if export_dir is not None else None
        events = _delete_rows(ids)
    return Batch(ids=ids, last=(rows[-1][1], rows[-1][0]), events=events, file=file)


def _delete_rows(ids: Sequence[int]) -> int:
    """Delete the charts' events, promises and rows; return how many events went. (The events'
    foreign key is checked at commit, when both are gone.)"""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {EVENT_TABLE} WHERE chart_id = ANY(%s)", [list(ids)])  # noqa: S608
        events = cursor.rowcount
        cursor.execute(f"DELETE FROM {PROMISE_TABLE} WHERE chart_id = ANY(%s)", [list(ids)])  # noqa: S608
        cursor.execute(f"DELETE FROM {CHART_TABLE} WHERE id = ANY(%s)", [list(ids)])  # noqa: S608
    return events


# One JSON line per chart, built by the server (every column under its name, times in ISO 8601
# with microseconds and offset): rows parsed into Python and formatted again were most of the
# pass's time (`bench/bench_retention.py`). `json_agg` puts a line break between its elements; a line
# break inside a value is always escaped in JSON, so removing every one leaves the same JSON.
EXPORT_SQL = (
    "SELECT replace(json_build_object('chart', row_to_json(c), 'events', coalesce(e.events, '[]'),"  # noqa: S608 (names from the models; values are parameters)
    " 'promise', row_to_json(p))::text, E'\\n', '')"
    f" FROM {CHART_TABLE} AS c"
    f" LEFT JOIN (SELECT chart_id, json_agg(e ORDER BY e.at, e.id) AS events FROM {EVENT_TABLE} AS e"
    "  WHERE e.chart_id = ANY(%(ids)s) GROUP BY chart_id) AS e ON e.chart_id = c.id"
    f" LEFT JOIN {PROMISE_TABLE} AS p ON p.chart_id = c.id"
    " WHERE c.id = ANY(%(ids)s) ORDER BY c.id"
)
EXPORT_COMPRESSION = 6  # gzip's level: its default, 9, costs twice the CPU for a few percent


def _export(ids: Sequence[int], export_dir: Path) -> Path:
    """Write the charts with their events and promises as gzip JSON lines, durably, under a name no
    other batch has: written to a temporary file and fsynced, linked to its name (a link fails rather
    than replace a file), the directory fsynced."""
    name = f"charts-{timezone.now():%Y%m%dT%H%M%S%fZ}-{min(ids)}-{max(ids)}.jsonl.gz"
    path, partial = export_dir / name, export_dir / f".{name}.partial"
    with connection.cursor() as cursor:
        cursor.execute(EXPORT_SQL, {"ids": list(ids)})
        lines = "".join(f"{line}\n" for (line,) in cursor.fetchall())
    with open(partial, "xb") as raw:
        with gzip.GzipFile(filename=name, mode="wb", fileobj=raw, compresslevel=EXPORT_COMPRESSION) as stream:
            stream.write(lines.encode())
        raw.flush()
        os.fsync(raw.fileno())
    os.link(partial, path)
    os.unlink(partial)
    directory = os.open(export_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return path
