"""The retention pass on real PostgreSQL: what goes, what stays, the export, a crash, the passes' locks."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartPromise, ChartState, DurationStat
from scheduling import retention, tasks
from scheduling.dispatch import DISPATCH_LOCK
from scheduling.retention import retention_run
from tests.conftest import Tenants
from tests.database import database_url
from tests.factories import ChartFactory

S = ChartState
DAY = timedelta(days=1)


def finished(tenants: Tenants, *, state: str = S.SUCCEEDED, age: timedelta, **fields: Any) -> Chart:
    """A chart that finished `age` ago, with the events of its life and its promise."""
    at = timezone.now() - age
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=state, created_at=at - DAY, finished_at=at, **fields
    )
    for before, after in (("", S.QUEUED), (S.QUEUED, S.DISPATCHING), (S.DISPATCHING, state)):
        ChartEvent.objects.create(chart=chart, from_state=before, to_state=after, actor="system:test", at=at)
    ChartPromise.objects.create(chart=chart, planned_at=at - DAY, eta=at)
    return chart


def exported(files: list[Path]) -> list[dict[str, Any]]:
    lines = []
    for path in files:
        with gzip.open(path, "rt") as stream:
            lines.extend(json.loads(line) for line in stream)
    return lines


def as_exported(row: dict[str, Any]) -> dict[str, Any]:
    """A row as its export line reads back: times parsed, the rest as JSON has it."""
    return {key: value if isinstance(value, datetime) else json.loads(json.dumps(value)) for key, value in row.items()}


def read_back(line: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    """An exported row with the times of `like` parsed (ISO 8601 with offset)."""
    return {
        key: datetime.fromisoformat(value) if isinstance(like.get(key), datetime) else value
        for key, value in line.items()
    }


@pytest.fixture
def export_dir(settings: Any, tmp_path: Path) -> Path:
    settings.FAIRSCHED_RETENTION_EXPORT_DIR = str(tmp_path / "export")
    return tmp_path / "export"


def test_old_finished_charts_go_with_their_events_and_the_rest_stays(tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 90
    old = [finished(tenants, state=state, age=91 * DAY) for state in (S.SUCCEEDED, S.FAILED, S.CANCELLED)]
    recent = finished(tenants, age=89 * DAY)
    # Unfinished charts stay whatever their age; so does a cancelled one whose workflow may still run.
    ancient = timezone.now() - 400 * DAY
    unfinished = [
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state, created_at=ancient)
        for state in (S.QUEUED, S.PAUSED, S.RETRY_WAIT, S.DISPATCHING, S.RUNNING)
    ]
    closing = finished(tenants, state=S.CANCELLED, age=400 * DAY, cancel_requested_at=ancient)
    DurationStat.objects.create(org=tenants.org_a, workflow=tenants.workflow, count=3, total_seconds=30.0)

    result = retention_run()

    assert result.deleted == 3
    assert result.events == 9
    assert result.finished
    assert not Chart.objects.filter(pk__in=[chart.pk for chart in old]).exists()
    assert not ChartEvent.objects.filter(chart_id__in=[chart.pk for chart in old]).exists()
    assert not ChartPromise.objects.filter(chart_id__in=[chart.pk for chart in old]).exists()
    kept = {recent.pk, closing.pk, *(chart.pk for chart in unfinished)}
    assert set(Chart.objects.values_list("pk", flat=True)) == kept
    assert ChartEvent.objects.filter(chart_id=recent.pk).count() == 3
    assert ChartPromise.objects.filter(chart_id=recent.pk).exists()
    assert DurationStat.objects.get().count == 3  # what the ETAs learned stays
    assert result.files == []  # no export directory: no export


def test_zero_days_keeps_everything(tenants: Tenants, settings: Any, export_dir: Path) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 0
    chart = finished(tenants, age=4000 * DAY)
    result = retention_run()
    assert result.deleted == 0
    assert result.files == []
    assert Chart.objects.filter(pk=chart.pk).exists()
    assert ChartEvent.objects.filter(chart=chart).count() == 3


def test_the_export_holds_exactly_the_deleted_rows(tenants: Tenants, settings: Any, export_dir: Path) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 30
    old = [
        finished(
            tenants, age=(31 + n) * DAY, payload={"n": n, "text": "é\nsecond line"}, last_error="Traceback\n  line 2"
        )
        for n in range(5)
    ]
    finished(tenants, age=29 * DAY)
    rows = {chart["id"]: chart for chart in Chart._base_manager.filter(pk__in=[c.pk for c in old]).values()}
    events = {chart.pk: list(ChartEvent.objects.filter(chart=chart).order_by("at", "id").values()) for chart in old}
    promises = {chart.pk: ChartPromise.objects.filter(chart=chart).values().get() for chart in old}

    result = retention_run(batch_size=2)

    assert result.deleted == 5
    assert result.batches == 3
    assert len(result.files) == 3
    assert all(path.parent == export_dir and path.name.endswith(".jsonl.gz") for path in result.files)
    assert sorted(path.name for path in export_dir.iterdir()) == sorted(path.name for path in result.files)
    lines = exported(result.files)
    assert sorted(line["chart"]["id"] for line in lines) == sorted(rows)
    for line in lines:
        chart_id = line["chart"]["id"]
        # Every column, times to the microsecond with their offset: the row can be rebuilt as it was.
        assert set(line) == {"chart", "events", "promise"}
        assert read_back(line["chart"], rows[chart_id]) == as_exported(rows[chart_id])
        assert [read_back(event, events[chart_id][0]) for event in line["events"]] == [
            as_exported(event) for event in events[chart_id]
        ]
        assert read_back(line["promise"], promises[chart_id]) == as_exported(promises[chart_id])
        assert line["chart"]["payload"] == rows[chart_id]["payload"]


def test_a_crash_after_the_export_loses_nothing_and_a_rerun_finishes(
    tenants: Tenants, settings: Any, export_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 30
    old = {finished(tenants, age=(31 + n) * DAY).pk for n in range(5)}
    delete = retention._delete_rows
    calls = 0

    def crash_on_second_batch(ids: list[int]) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("worker killed")
        return delete(ids)

    monkeypatch.setattr(retention, "_delete_rows", crash_on_second_batch)
    with pytest.raises(RuntimeError):
        retention_run(batch_size=2)
    first_files = sorted(export_dir.glob("*.jsonl.gz"))
    assert len(first_files) == 2  # the first batch's, and the crashed batch's
    gone = old - set(Chart.objects.values_list("pk", flat=True))
    assert len(gone) == 2  # the first batch committed; the crashed one rolled back whole
    assert ChartEvent.objects.filter(chart_id__in=old - gone).count() == 9

    monkeypatch.setattr(retention, "_delete_rows", delete)
    result = retention_run(batch_size=2)

    assert result.deleted == 3
    assert not Chart.objects.filter(pk__in=old).exists()
    files = sorted(export_dir.glob("*.jsonl.gz"))
    assert len(files) == 4
    assert set(first_files) <= set(files)
    assert not list(export_dir.glob(".*partial"))
    lines = exported(files)
    assert {line["chart"]["id"] for line in lines} == old  # every deleted chart is in an export
    copies: dict[int, list[dict[str, Any]]] = {}
    for line in lines:
        copies.setdefault(line["chart"]["id"], []).append(line)
    assert all(len(events) == 3 for line in lines for events in [line["events"]])
    assert all(all(copy == same[0] for copy in same) for same in copies.values())  # a repeat is identical


def test_a_run_is_bounded_and_the_next_goes_on(tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 1
    for n in range(7):
        finished(tenants, age=(2 + n) * DAY)
    first = retention_run(batch_size=2, max_charts=3)
    assert first.deleted == 3
    assert not first.finished
    assert Chart.objects.count() == 4
    second = retention_run(batch_size=2, max_charts=10)
    assert second.deleted == 4
    assert second.finished
    assert Chart.objects.count() == 0


def test_a_run_waits_while_the_dispatcher_holds_its_lock(tenants: Tenants, settings: Any) -> None:
    """Another session holds the dispatcher's lock: the run looks again until it is released."""
    settings.FAIRSCHED_RETENTION_DAYS = 1
    finished(tenants, age=2 * DAY)
    with psycopg.connect(database_url(), autocommit=True) as dispatcher:
        dispatcher.execute("SELECT pg_advisory_lock(%s)", [DISPATCH_LOCK])
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            if len(waits) == 3:
                dispatcher.execute("SELECT pg_advisory_unlock(%s)", [DISPATCH_LOCK])

        result = retention_run(sleep=sleep)
    assert result.pauses == 3
    assert result.deleted == 1


def test_a_run_whose_time_is_up_while_a_pass_runs_deletes_nothing(tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 1
    finished(tenants, age=2 * DAY)
    with psycopg.connect(database_url(), autocommit=True) as dispatcher:
        dispatcher.execute("SELECT pg_advisory_lock(%s)", [DISPATCH_LOCK])
        result = retention_run(max_seconds=0, sleep=lambda seconds: None)
    assert result.deleted == 0
    assert not result.finished
    assert Chart.objects.count() == 1


def test_a_second_run_at_once_skips(tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 1
    finished(tenants, age=2 * DAY)
    with psycopg.connect(database_url(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [retention.RETENTION_LOCK])
        assert retention_run().locked is False
    assert Chart.objects.count() == 1


@pytest.fixture
def other_session() -> Iterator[psycopg.Connection[Any]]:
    """A second session that gives up on any lock after 200 ms (LockNotAvailable), as a pass would wait."""
    with psycopg.connect(database_url(), autocommit=True) as conn:
        conn.execute("SET lock_timeout = '200ms'")
        yield conn


@pytest.mark.django_db(transaction=True)
def test_a_batch_in_progress_blocks_no_claim_transition_or_replan_swap(
    tenants: Tenants,
    settings: Any,
    export_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    other_session: psycopg.Connection[Any],
) -> None:
    """While a batch holds its rows (between its export and its delete), another session claims a
    queued chart, finishes a running one, writes their plan rows and events, bumps the org, and takes
    the plan table's exclusive lock as the replan's swap does: none of it waits."""
    settings.FAIRSCHED_RETENTION_DAYS = 1
    old = finished(tenants, age=2 * DAY)
    queued = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=S.QUEUED, position=0)
    running = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=S.RUNNING, position=None)
    export = retention._export
    done: list[str] = []

    def export_then_race(ids: list[int], directory: Path) -> Path:
        path = export(ids, directory)
        with other_session.transaction():
            claimed = other_session.execute(
                "UPDATE charts_chart SET state = 'dispatching' WHERE id = %s AND state = 'queued'",
                [queued.pk],
            )
            assert claimed.rowcount == 1
            other_session.execute("UPDATE charts_chartplan SET position = NULL WHERE chart_id = %s", [queued.pk])
            other_session.execute(
                "UPDATE charts_chart SET state = 'succeeded', finished_at = now() WHERE id = %s",
                [running.pk],
            )
            other_session.execute("DELETE FROM charts_chartplan WHERE chart_id = %s", [running.pk])
            other_session.execute(
                "INSERT INTO charts_chartevent (chart_id, from_state, to_state, actor, reason, at)"
                " VALUES (%s, 'queued', 'dispatching', 'system:dispatcher', '', now())",
                [queued.pk],
            )
            other_session.execute("UPDATE orgs_org SET served = served + 1 WHERE id = %s", [tenants.org_a.pk])
            other_session.execute("LOCK TABLE charts_chartplan IN ACCESS EXCLUSIVE MODE")
        done.append("raced")
        return path

    monkeypatch.setattr(retention, "_export", export_then_race)
    result = retention_run()

    assert done == ["raced"]
    assert result.deleted == 1
    assert not Chart.objects.filter(pk=old.pk).exists()
    assert Chart.objects.get(pk=queued.pk).state == S.DISPATCHING
    assert Chart.objects.get(pk=running.pk).state == S.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_a_row_another_session_holds_is_skipped_not_waited_for(
    tenants: Tenants, settings: Any, other_session: psycopg.Connection[Any]
) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 1
    held, free = finished(tenants, age=3 * DAY), finished(tenants, age=2 * DAY)
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '200ms'")
    with other_session.transaction():
        other_session.execute("SELECT 1 FROM charts_chart WHERE id = %s FOR UPDATE", [held.pk])
        result = retention_run()
    assert result.deleted == 1
    assert list(Chart.objects.values_list("pk", flat=True)) == [held.pk]
    assert not Chart.objects.filter(pk=free.pk).exists()
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")
    assert retention_run().deleted == 1


def test_beat_sends_the_retention_once_a_minute_unless_it_keeps_everything(
    db: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    monkeypatch.setattr(tasks.retention, "delay", lambda: sent.append("retention"))
    monkeypatch.setattr(tasks.reconcile, "delay", lambda: None)
    monkeypatch.setattr(tasks, "replan_soon", lambda: None)
    cache.delete(tasks.LAST_RUN_KEY.format("retention"))
    settings.FAIRSCHED_RETENTION_DAYS = 0
    tasks.tick()
    assert sent == []
    settings.FAIRSCHED_RETENTION_DAYS = 90
    tasks.tick()
    tasks.tick()  # within the minute: not again
    assert sent == ["retention"]
    cache.delete(tasks.LAST_RUN_KEY.format("retention"))


def test_the_task_runs_the_pass(tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 1
    finished(tenants, age=2 * DAY)
    tasks.retention.apply().get()
    assert Chart.objects.count() == 0
