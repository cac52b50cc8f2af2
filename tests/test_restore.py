"""Backup and restore on the real PostgreSQL and a real Temporal dev server with the demo worker: the
README's two dumps (everything but the plan table, and the plan table's definition) taken while charts
run, the original carrying on after them, then a `pg_restore` of both into a fresh database that
fairsched (another process, as after a disaster) runs against. The restored charts and events are
there, the plan table comes back empty and the first replan rebuilds it, and dispatch carries on with
nothing run twice: a chart that started after the backup (queued in the restored database) is picked
up under its workflow id, not started again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from charts.models import Chart, ChartEvent, ChartPlan, ChartState
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from fairsched.devservices import REPO_ROOT
from knobs.services import scheduler_config_set
from orgs.models import Org, Workflow
from scheduling.dispatch import dispatch_run
from scheduling.reconcile import reconcile_run
from scheduling.replan import plan_refresh
from tests.database import database_url
from tests.factories import OrgFactory, WorkflowFactory

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ACTOR = Actor("user:test", staff=True)
COMMAND_SECONDS = 120
# The README's backup: the data without the plan table (so the dump never holds the plan table's
# lock, which every replan's swap needs), and the plan table's definition alone (a moment's lock).
DATA_DUMP = ["--exclude-table=charts_chartplan"]
PLAN_TABLE_DUMP = ["--schema-only", "--table=charts_chartplan"]

# What fairsched does against the restored database, in its own process: count the plan rows it
# finds, run the passes as the workers would until every chart has ended, and say what it sees.
AFTER_RESTORE = """
import json, time
from common import events
events.request_replan = lambda: None
from charts.models import Chart, ChartEvent, ChartPlan, ChartState
from scheduling.dispatch import dispatch_run
from scheduling.reconcile import reconcile_run
from scheduling.replan import plan_refresh
found = {"plan_rows_restored": ChartPlan.objects.count(), "events_restored": ChartEvent.objects.count()}
plan_refresh()
found["plan_rows_after_replan"] = sorted(ChartPlan.objects.values_list("chart_id", flat=True))
found["waiting_or_in_flight"] = sorted(
    Chart.objects.exclude(state__in=[ChartState.SUCCEEDED, ChartState.FAILED, ChartState.CANCELLED])
    .values_list("id", flat=True)
)
deadline = time.monotonic() + 60
while Chart.objects.exclude(state=ChartState.SUCCEEDED).exists() and time.monotonic() < deadline:
    reconcile_run()
    plan_refresh()
    dispatch_run()
    time.sleep(0.2)
found["charts"] = {
    str(c.pk): {"state": c.state, "runs": c.runs, "workflow_id": c.temporal_workflow_id, "run_id": c.temporal_run_id}
    for c in Chart.objects.all()
}
found["events"] = {
    str(pk): list(Chart.objects.get(pk=pk).events.order_by("id").values_list("to_state", flat=True))
    for pk in Chart.objects.values_list("pk", flat=True)
}
print("RESULT " + json.dumps(found))
"""


@pytest.fixture(autouse=True)
def _passes_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("common.events.request_replan", lambda: None)


@pytest.fixture
def restored_database() -> Iterator[str]:
    """The name of a fresh, empty database beside the test database, dropped afterwards."""
    name = f"{settings.DATABASES['default']['NAME']}_restored_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False, **kwargs)
    assert result.returncode == 0, f"{args[0]} failed: {result.stdout}\n{result.stderr}"
    return result


def submit(org: Org, workflow: Workflow, count: int) -> list[Chart]:
    items = [ChartRequest(workflow.name, f"{org.slug}{i}") for i in range(count)]
    return [chart for chart, _ in chart_submit_bulk(org=org, items=items, actor=ACTOR)]


def drive_until(done: Callable[[], bool], *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the loop did not get there in time"
        reconcile_run()
        plan_refresh()
        dispatch_run()
        time.sleep(0.2)


def in_state(state: str) -> set[int]:
    return set(Chart.objects.filter(state=state).values_list("pk", flat=True))


def test_a_restored_dump_rebuilds_its_plan_and_runs_nothing_twice(
    temporal_worker: str, temporal_server: str, restored_database: str, tmp_path: Path
) -> None:
    scheduler_config_set(actor=ACTOR, budget=2)
    workflow = WorkflowFactory(name="demo", task_queue=temporal_worker, default_cost=1, params={"duration": 1.0})
    big, small = OrgFactory(slug="big", weight=1), OrgFactory(slug="small", weight=1)
    charts = submit(big, workflow, 3) + submit(small, workflow, 3)
    plan_refresh()
    dispatch_run()
    running_at_backup = in_state(ChartState.RUNNING)
    assert len(running_at_backup) == 2
    assert ChartPlan.objects.count() == len(charts)
    event_count_at_backup = ChartEvent.objects.count()

    # 1. The backup, while two charts run.
    dump, plan_table = tmp_path / "fairsched.dump", tmp_path / "fairsched-plan-table.dump"
    run(["pg_dump", "-Fc", *DATA_DUMP, "-f", str(dump), "-d", database_url()])
    run(["pg_dump", "-Fc", *PLAN_TABLE_DUMP, "-f", str(plan_table), "-d", database_url()])

    # 2. The original carries on: the two runs end, the next two start (after the backup).
    drive_until(lambda: len(in_state(ChartState.SUCCEEDED)) >= 2 and len(in_state(ChartState.RUNNING)) == 2)
    started_after_backup = {
        chart.pk: chart.temporal_run_id
        for chart in Chart.objects.filter(state=ChartState.RUNNING).exclude(pk__in=running_at_backup)
    }
    assert len(started_after_backup) == 2

    # 3. The restore into a fresh database, and fairsched started against it.
    restored_url = database_url().rsplit("/", 1)[0] + f"/{restored_database}"
    run(["pg_restore", "--no-owner", "--exit-on-error", "-d", restored_url, str(dump)])
    run(["pg_restore", "--no-owner", "--exit-on-error", "-d", restored_url, str(plan_table)])
    env = {
        **os.environ,
        "DATABASE_URL": restored_url,
        "TEMPORAL_ADDRESS": temporal_server,
        "TEMPORAL_NAMESPACE": "default",
        "REDIS_URL": settings.REDIS_URL,
    }
    output = run([sys.executable, "manage.py", "shell", "-c", AFTER_RESTORE], cwd=REPO_ROOT, env=env).stdout
    found = json.loads(output.split("RESULT ", 1)[1])

    # The charts and their events are as the backup had them; the plan table came back empty and
    # the first replan wrote a row for every chart still waiting or in flight.
    assert found["events_restored"] == event_count_at_backup
    assert found["plan_rows_restored"] == 0
    assert found["plan_rows_after_replan"] == found["waiting_or_in_flight"]
    assert sorted(found["waiting_or_in_flight"]) == sorted(chart.pk for chart in charts)
    restored = {int(pk): chart for pk, chart in found["charts"].items()}
    assert sorted(restored) == sorted(chart.pk for chart in charts)

    # Every chart ended once, on its first run: the runs that ended after the backup were settled
    # from Temporal, and the charts started after it got the very run that had started, not a new one.
    assert all(chart["state"] == ChartState.SUCCEEDED for chart in restored.values()), restored
    assert all(chart["runs"] == 1 for chart in restored.values()), restored
    for pk, run_id in started_after_backup.items():
        assert restored[pk]["run_id"] == run_id, (pk, restored[pk], run_id)
    for pk in running_at_backup | set(started_after_backup):
        assert found["events"][str(pk)] == ["queued", "dispatching", "running", "succeeded"]


@pytest.mark.django_db(transaction=True)
def test_the_data_dump_never_waits_for_the_plan_table(tmp_path: Path) -> None:
    """A replan's swap holds the plan table's exclusive lock (and a dump that holds the table's share
    lock holds every replan for as long as it runs): the data dump reads everything else while a
    swap's lock is held; a dump of every table could not get the lock."""
    url = database_url()
    with psycopg.connect(url) as swapping:
        swapping.execute("LOCK TABLE charts_chartplan IN ACCESS EXCLUSIVE MODE")
        run(["pg_dump", "-Fc", *DATA_DUMP, "-f", str(tmp_path / "data.dump"), "-d", url])
        every_table = subprocess.run(
            ["pg_dump", "-Fc", "--no-unlogged-table-data", "--lock-wait-timeout=200", "-f", os.devnull, "-d", url],
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        swapping.rollback()
    assert every_table.returncode != 0
    assert "LOCK TABLE public.charts_chartplan" in every_table.stderr
