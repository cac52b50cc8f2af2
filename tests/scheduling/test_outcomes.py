"""How runs end, on the real PostgreSQL and a real Temporal dev server with the demo worker: provider
throttles that are no failures, run timeouts (a workflow type no worker serves cannot hold the budget),
terminations in Temporal, cancels that Temporal carries out or that fairsched enforces by terminating,
and a success that clears the last error."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartState
from charts.services import ChartRequest, chart_cancel, chart_submit_bulk
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.models import Org, Workflow
from scheduling.dispatch import dispatch_run, workflow_id_for
from scheduling.reconcile import reconcile_run
from scheduling.replan import plan_refresh
from scheduling.snapshot import to_seconds
from scheduling.temporal.client import describe_workflow, temporal_call
from tests.factories import OrgFactory, WorkflowFactory

pytestmark = [pytest.mark.temporal, pytest.mark.django_db(transaction=True)]
ACTOR = Actor("user:test", staff=True)
UNSERVED_TYPE = "fairsched.no-worker-serves-this"


@pytest.fixture(autouse=True)
def _passes_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test drives the passes itself; a lever's after-commit replan request goes nowhere."""
    monkeypatch.setattr("common.events.request_replan", lambda: None)


@pytest.fixture
def demo(temporal_worker: str) -> Callable[..., Workflow]:
    def make(name: str = "demo", *, duration: float = 0.3, run_timeout: int | None = None, **params: Any) -> Workflow:
        return WorkflowFactory(
            name=name, task_queue=temporal_worker, params={"duration": duration, **params}, run_timeout=run_timeout
        )

    return make


def submit(org: Org, workflow: Workflow, count: int = 1, *, prefix: str = "c") -> list[Chart]:
    items = [ChartRequest(workflow.name, f"{prefix}{i}") for i in range(count)]
    return [chart for chart, _ in chart_submit_bulk(org=org, items=items, actor=ACTOR)]


def drive_until(done: Callable[[], bool], *, timeout: float = 60.0, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reconcile_run()
        plan_refresh()
        dispatch_run()
        if done():
            return
        time.sleep(every)
    raise AssertionError("the loop did not get there in time")


def fresh(chart: Chart) -> Chart:
    return Chart.objects.get(pk=chart.pk)


def run_statuses(chart: Chart) -> list[str | None]:
    """What Temporal says of each of the chart's runs, in order."""
    created = to_seconds(chart.created_at)
    outcomes = [describe_workflow(workflow_id_for(chart, run, created)) for run in range(1, chart.runs + 1)]
    return [outcome.status if outcome else None for outcome in outcomes]


def test_throttles_requeue_without_spending_attempts(demo: Callable[..., Workflow]) -> None:
    """On main a throttle spent an attempt: with one attempt allowed, the first throttle failed the chart."""
    scheduler_config_set(actor=ACTOR, budget=1, max_attempts=1)
    workflow = demo(duration=0.1, fail_probability=1.0, provider="gpu-east", throttle_retry_after=0.5)
    org = OrgFactory(slug="busy")
    (chart,) = submit(org, workflow)

    drive_until(lambda: fresh(chart).runs >= 3)
    throttled = fresh(chart)
    assert throttled.state != ChartState.FAILED
    assert throttled.attempt <= 1
    # Each throttle put it back in the queue (the provider's pause for the org is written only when
    # the reconcile sees the throttle before its Retry-After has passed: test_reconcile.py pins it).
    reasons = list(throttled.events.filter(to_state=ChartState.QUEUED).values_list("reason", flat=True))
    assert len([reason for reason in reasons if reason.startswith("throttled by gpu-east")]) >= 2

    Workflow.objects.filter(pk=workflow.pk).update(params={"duration": 0.1})
    drive_until(lambda: fresh(chart).state == ChartState.SUCCEEDED)
    done = fresh(chart)
    assert done.attempt == 1
    assert done.last_error == ""
    statuses = run_statuses(done)
    assert statuses[-1] == "completed"
    assert set(statuses[:-1]) == {"failed"}  # each throttled run has its own closed workflow
    assert len(statuses) == done.runs >= 4


def test_a_workflow_no_worker_serves_times_out_and_frees_the_budget(
    demo: Callable[..., Workflow], temporal_worker: str
) -> None:
    """On main such a run stayed `running` forever, holding the budget."""
    scheduler_config_set(actor=ACTOR, budget=1, max_attempts=2, backoff_base=0.2, backoff_ceiling=0.2)
    orphan = WorkflowFactory(name="orphan", workflow_type=UNSERVED_TYPE, task_queue=temporal_worker, run_timeout=2)
    (stuck,) = submit(OrgFactory(slug="stuck"), orphan)
    drive_until(lambda: fresh(stuck).state == ChartState.RUNNING)
    (behind,) = submit(OrgFactory(slug="behind"), demo(duration=0.1))

    drive_until(lambda: fresh(stuck).state == ChartState.FAILED and fresh(behind).state == ChartState.SUCCEEDED)
    failed = fresh(stuck)
    assert (failed.attempt, failed.last_error) == (2, "timed out")
    reasons = list(failed.events.values_list("reason", flat=True))
    assert any(reason.startswith("attempt 1 failed, retry in") and reason.endswith(": timed out") for reason in reasons)
    assert reasons[-1] == "attempt 2 of 2 failed: timed out"
    assert run_statuses(failed) == ["timed_out", "timed_out"]


def test_a_run_terminated_in_temporal_fails_its_chart_for_good(demo: Callable[..., Workflow]) -> None:
    """On main a termination was retried as a new attempt."""
    scheduler_config_set(actor=ACTOR, budget=1, max_attempts=3, backoff_base=0.1, backoff_ceiling=0.1)
    (chart,) = submit(OrgFactory(slug="ops"), demo(duration=60))
    drive_until(lambda: fresh(chart).state == ChartState.RUNNING)
    workflow_id = fresh(chart).temporal_workflow_id

    async def terminate(client: Any) -> None:
        await client.get_workflow_handle(workflow_id).terminate(reason="operator: wrong input file")

    temporal_call(terminate)
    drive_until(lambda: fresh(chart).state == ChartState.FAILED)
    drive_until(lambda: True)  # one more cycle: nothing starts it again
    failed = fresh(chart)
    assert (failed.state, failed.attempt, failed.runs) == (ChartState.FAILED, 1, 1)
    assert failed.last_error == "terminated in Temporal: operator: wrong input file"


def test_cancelling_a_running_chart_cancels_its_workflow_in_temporal(demo: Callable[..., Workflow]) -> None:
    """On main the chart said `cancelled` but nothing confirmed that its workflow closed."""
    scheduler_config_set(actor=ACTOR, budget=1)
    (chart,) = submit(OrgFactory(slug="quitter"), demo(duration=60))
    drive_until(lambda: fresh(chart).state == ChartState.RUNNING)

    chart_cancel(chart=fresh(chart), actor=ACTOR)
    drive_until(lambda: fresh(chart).cancel_requested_at is None)

    cancelled = fresh(chart)
    assert describe_workflow(cancelled.temporal_workflow_id).status == "canceled"  # type: ignore[union-attr]
    assert cancelled.events.last().reason == "workflow closed in Temporal: canceled"  # type: ignore[union-attr]


def test_a_workflow_that_ignores_its_cancel_is_terminated_after_the_grace(temporal_worker: str, settings: Any) -> None:
    """A workflow no worker serves never acts on a cancel request: after the grace it is terminated."""
    settings.FAIRSCHED_CANCEL_GRACE = 1.0
    scheduler_config_set(actor=ACTOR, budget=1)
    orphan = WorkflowFactory(name="orphan", workflow_type=UNSERVED_TYPE, task_queue=temporal_worker, run_timeout=600)
    (chart,) = submit(OrgFactory(slug="stuck"), orphan)
    drive_until(lambda: fresh(chart).state == ChartState.RUNNING)

    requested = timezone.now()
    chart_cancel(chart=fresh(chart), actor=ACTOR)
    drive_until(lambda: fresh(chart).cancel_requested_at is None)

    outcome = describe_workflow(fresh(chart).temporal_workflow_id)
    assert outcome is not None
    assert outcome.status == "terminated"
    assert outcome.close_time is not None
    assert (outcome.close_time - requested).total_seconds() >= 1.0
    assert fresh(chart).events.last().reason == "workflow closed in Temporal: terminated"  # type: ignore[union-attr]


def test_a_success_after_a_failure_clears_the_last_error(demo: Callable[..., Workflow]) -> None:
    # A backoff long enough for the test to see the chart waiting, however slow a loop cycle is.
    scheduler_config_set(actor=ACTOR, budget=1, max_attempts=2, backoff_base=4, backoff_ceiling=4)
    workflow = demo(duration=0.1, fail_probability=1.0)
    (chart,) = submit(OrgFactory(slug="flaky"), workflow)
    drive_until(lambda: fresh(chart).state == ChartState.RETRY_WAIT)
    assert "failed" in fresh(chart).last_error

    Workflow.objects.filter(pk=workflow.pk).update(params={"duration": 0.1})
    drive_until(lambda: fresh(chart).state == ChartState.SUCCEEDED)
    done = fresh(chart)
    assert (done.attempt, done.last_error) == (2, "")
    assert any("failed" in reason for reason in done.events.values_list("reason", flat=True))
