"""The whole loop run by a real Celery worker with beat (prefork children, Redis broker) against the
test database and a real Temporal dev server: nobody drives the passes but beat. Killing the worker
with SIGKILL mid-run loses nothing and runs nothing twice once a new worker is up."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from charts.models import Chart, ChartEvent, ChartState
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from knobs.services import scheduler_config_set
from scheduling.temporal.client import describe_workflow
from tests.celery_workers import celery_workers
from tests.factories import OrgFactory, WorkflowFactory

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
ACTOR = Actor("user:test", staff=True)


@pytest.fixture
def celery_worker(temporal_settings: Any, tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start (and restart) `celery worker -B` as a child process; all are stopped at the end."""
    with celery_workers(tmp_path, TEMPORAL_ADDRESS=temporal_settings.TEMPORAL_ADDRESS) as start:
        yield start


def wait_for(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"not reached within {timeout} s: {dict(Chart.objects.values_list('external_id', 'state'))}")


def test_beat_drives_charts_to_success_and_survives_a_worker_kill(
    temporal_worker: str, celery_worker: Callable[[], subprocess.Popen[bytes]]
) -> None:
    scheduler_config_set(actor=ACTOR, budget=2, replan_interval=0.5, reconcile_interval=0.5)
    workflow = WorkflowFactory(name="e2e", task_queue=temporal_worker, params={"duration": 0.5})
    orgs = [OrgFactory(slug="e2e-a", weight=2), OrgFactory(slug="e2e-b", weight=1)]
    for org in orgs:
        chart_submit_bulk(
            org=org, items=[ChartRequest(workflow.name, f"{org.slug}-{i}") for i in range(5)], actor=ACTOR
        )

    worker = celery_worker()
    wait_for(lambda: Chart.objects.filter(state=ChartState.SUCCEEDED).count() >= 2, timeout=60)
    os.killpg(worker.pid, signal.SIGKILL)  # mid-run: some charts are in flight
    worker.wait(10)
    celery_worker()
    wait_for(lambda: Chart.objects.filter(state=ChartState.SUCCEEDED).count() == 10, timeout=90)

    # Nothing lost, nothing run twice: each chart had one run (one workflow id; a claim that the kill
    # took before its start is undone by reconcile and claimed again under the same id), and Temporal
    # agrees it completed. A run whose dispatcher died before marking it running may go straight from
    # dispatching to succeeded, so runs are counted on the chart, not by its running events.
    for chart in Chart.objects.all():
        assert (chart.attempt, chart.runs) == (1, 1), chart
        claims = chart.events.filter(to_state=ChartState.DISPATCHING).count()
        undone = chart.events.filter(from_state=ChartState.DISPATCHING, to_state=ChartState.QUEUED).count()
        assert claims - undone == 1, chart
    for chart in Chart.objects.all():
        outcome = describe_workflow(chart.temporal_workflow_id)
        assert outcome is not None, chart
        assert outcome.status == "completed", chart
    # The budget was never exceeded: replay the event log.
    in_flight = 0
    peak = 0
    for to_state, from_state in ChartEvent.objects.order_by("at", "id").values_list("to_state", "from_state"):
        if to_state == ChartState.DISPATCHING:
            in_flight += 1
        elif from_state in (ChartState.DISPATCHING, ChartState.RUNNING) and to_state != ChartState.RUNNING:
            in_flight -= 1
        peak = max(peak, in_flight)
    assert peak <= 2
