"""`reconcile.settle`'s decision table, row by row, with an injected `describe` (a fake description
of the chart's Temporal workflow): no Temporal, no dispatch pass, one in-flight chart per test.

The same outcomes against the real Temporal dev server are in `test_outcomes.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartState, DurationStat
from knobs.models import SchedulerConfig
from orgs.models import Org, ProviderPause
from scheduling.reconcile import ReconcileResult, Settled, settle
from scheduling.temporal.client import WorkflowOutcome
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

pytestmark = pytest.mark.django_db
WORKFLOW_ID = "chart-test-r1"
MAX_ATTEMPTS = 3


@dataclass
class Describe:
    """A fake `describe`: answers `outcome` (None: Temporal has no record) and notes what it was asked."""

    outcome: WorkflowOutcome | None
    asked: list[str] = field(default_factory=list)
    error: Exception | None = None

    def __call__(self, workflow_id: str) -> WorkflowOutcome | None:
        self.asked.append(workflow_id)
        if self.error is not None:
            raise self.error
        return self.outcome


def outcome(status: str, **details: Any) -> WorkflowOutcome:
    began = timezone.now() - timedelta(seconds=40)
    closed = None if status == "running" else began + timedelta(seconds=30)
    return WorkflowOutcome(status, "run-9", began, closed, **details)


@pytest.fixture
def config() -> SchedulerConfig:
    config = SchedulerConfig.load()
    config.max_attempts = MAX_ATTEMPTS
    config.dispatch_stale_after = 60.0
    return config


def in_flight(
    tenants: Tenants, *, state: str = ChartState.RUNNING, attempt: int = 1, claimed_ago: float = 600, **fields: Any
) -> Chart:
    now = timezone.now()
    fields.setdefault("temporal_workflow_id", WORKFLOW_ID)
    return ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        state=state,
        attempt=attempt,
        runs=attempt,
        cost=1,
        claimed_at=now - timedelta(seconds=claimed_ago),
        started_at=None if state == ChartState.DISPATCHING else now - timedelta(seconds=claimed_ago),
        **fields,
    )


def run_settle(chart: Chart, config: SchedulerConfig, describe: Describe) -> tuple[bool, ReconcileResult, Chart]:
    settled = settle(Chart.objects.get(pk=chart.pk), config=config, describe=describe)
    return settled.still_running, ReconcileResult.of([(chart.pk, settled.outcome)]), Chart.objects.get(pk=chart.pk)


def outcomes_of(result: ReconcileResult) -> dict[str, list[int]]:
    return {name: ids for name, ids in vars(result).items() if ids}


def last_reason(chart: Chart) -> str:
    return ChartEvent.objects.filter(chart=chart).latest("at", "id").reason


# Temporal's answer for a run that ended -> (the chart's state after, the result list it is in, the
# reason's start), for a running chart on its first of MAX_ATTEMPTS attempts.
ENDED = [
    (outcome("completed"), ChartState.SUCCEEDED, "succeeded", "workflow completed"),
    (outcome("canceled"), ChartState.CANCELLED, "cancelled", "workflow cancelled"),
    (outcome("failed", failure_message="boom"), ChartState.RETRY_WAIT, "retried", "attempt 1 failed, retry in"),
    (outcome("timed_out"), ChartState.RETRY_WAIT, "retried", "attempt 1 failed, retry in"),
    (outcome("terminated", failure_message="stop it"), ChartState.FAILED, "failed", "terminated in Temporal: stop it"),
    (outcome("continued_as_new"), ChartState.RETRY_WAIT, "retried", "attempt 1 failed, retry in"),
    (
        outcome("failed", failure_message="slow down", throttled=True, retry_after_seconds=120.0),
        ChartState.QUEUED,
        "throttled",
        "throttled by its provider",
    ),
]


@pytest.mark.parametrize(("told", "state", "listed", "reason"), ENDED, ids=[row[0].status for row in ENDED])
def test_a_run_that_ended(
    tenants: Tenants, config: SchedulerConfig, told: WorkflowOutcome, state: str, listed: str, reason: str
) -> None:
    chart = in_flight(tenants)
    describe = Describe(told)
    still_running, result, after = run_settle(chart, config, describe)
    assert describe.asked == [WORKFLOW_ID]
    assert still_running is False
    assert after.state == state
    assert outcomes_of(result) == {listed: [chart.pk]}
    assert last_reason(after).startswith(reason)


@pytest.mark.parametrize(("closed_ago", "learned"), [(0.5, 40.0), (10.0, 32.0)])
def test_completed_records_the_duration_and_clears_the_last_error(
    tenants: Tenants, config: SchedulerConfig, closed_ago: float, learned: float
) -> None:
    """The run began 40 s ago in Temporal. Closed 0.5 s ago, it held its budget units until this
    settle, 40 s, and that is what the plan's lanes must be held for (the live load run: 0.4-0.5 s a
    run between a close and its settle, the ETAs 13-26% early where only the backlog drained).
    Closed 10 s ago, past one reconcile interval (2 s here, the longest a loop that runs takes to
    settle a closed run), the rest is an outage of the loop, which says nothing of the next runs: 32
    s. Its finish is its close either way."""
    config.reconcile_interval = 2.0
    chart = in_flight(tenants, attempt=2, last_error="attempt 1: boom")
    began = timezone.now() - timedelta(seconds=40)
    told = WorkflowOutcome("completed", "run-9", began, timezone.now() - timedelta(seconds=closed_ago))
    _, _, after = run_settle(chart, config, Describe(told))
    assert (after.state, after.last_error, after.temporal_run_id) == (ChartState.SUCCEEDED, "", "run-9")
    assert after.finished_at == told.close_time
    stat = DurationStat.objects.get(org=tenants.org_a, workflow=tenants.workflow)
    assert (stat.count, stat.mean) == (1, pytest.approx(learned, abs=0.3))


@pytest.mark.parametrize("status", ["failed", "timed_out"])
def test_a_failure_on_the_last_attempt_fails_the_chart(tenants: Tenants, config: SchedulerConfig, status: str) -> None:
    chart = in_flight(tenants, attempt=MAX_ATTEMPTS)
    _, result, after = run_settle(chart, config, Describe(outcome(status, failure_message="boom")))
    assert after.state == ChartState.FAILED
    assert result.failed == [chart.pk]
    assert after.last_error == ("timed out" if status == "timed_out" else "boom")


def test_a_failure_with_attempts_left_waits_out_a_backoff(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants, attempt=1)
    _, _, after = run_settle(chart, config, Describe(outcome("failed", failure_message="boom")))
    assert after.last_error == "boom"
    assert after.available_at is not None
    assert after.available_at > timezone.now()
    assert after.attempt == 1  # the attempt stays spent


def test_a_termination_fails_at_once_with_attempts_left(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants, attempt=1)
    _, result, after = run_settle(chart, config, Describe(outcome("terminated")))
    assert (after.state, result.failed) == (ChartState.FAILED, [chart.pk])
    assert after.last_error == "terminated in Temporal: no reason given"


def test_a_throttle_gives_the_attempt_and_the_service_back_and_pauses_the_provider(
    tenants: Tenants, config: SchedulerConfig
) -> None:
    provider = ProviderFactory(slug="llm")
    tenants.workflow.provider = provider
    tenants.workflow.save()
    Org.objects.filter(pk=tenants.org_a.pk).update(served=5.0)
    chart = in_flight(tenants, attempt=2, service=0.5)
    told = outcome("failed", throttled=True, retry_after_seconds=120.0)
    _, _, after = run_settle(chart, config, Describe(told))
    assert (after.state, after.attempt, after.runs) == (ChartState.QUEUED, 1, 2)
    assert Org.objects.get(pk=tenants.org_a.pk).served == pytest.approx(4.5)
    assert told.close_time is not None
    until = told.close_time + timedelta(seconds=120)
    assert after.available_at == until
    assert ProviderPause.objects.filter(provider=provider, org=tenants.org_a, until=until).exists()


def test_running_marks_a_dispatching_chart_running(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants, state=ChartState.DISPATCHING)
    told = outcome("running")
    still_running, result, after = run_settle(chart, config, Describe(told))
    assert still_running is True
    assert outcomes_of(result) == {"marked_running": [chart.pk]}
    assert (after.state, after.temporal_run_id, after.started_at) == (ChartState.RUNNING, "run-9", told.start_time)


def test_running_leaves_a_running_chart_alone(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants)
    events = ChartEvent.objects.filter(chart=chart).count()
    still_running, result, after = run_settle(chart, config, Describe(outcome("running")))
    assert still_running is True
    assert outcomes_of(result) == {}
    assert after.state == ChartState.RUNNING
    assert ChartEvent.objects.filter(chart=chart).count() == events


def test_not_found_while_running_is_a_lost_run(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants)
    _, result, after = run_settle(chart, config, Describe(None))
    assert (after.state, result.retried) == (ChartState.RETRY_WAIT, [chart.pk])
    assert after.last_error == "Temporal has no record of the workflow"


def test_not_found_for_a_stale_claim_puts_it_back_in_the_queue(tenants: Tenants, config: SchedulerConfig) -> None:
    Org.objects.filter(pk=tenants.org_a.pk).update(served=3.0)
    chart = in_flight(tenants, state=ChartState.DISPATCHING, attempt=1, claimed_ago=120, service=1.0)
    still_running, result, after = run_settle(chart, config, Describe(None))
    assert still_running is False
    assert outcomes_of(result) == {"requeued": [chart.pk]}
    assert (after.state, after.attempt, after.runs, after.temporal_workflow_id) == (ChartState.QUEUED, 0, 0, "")
    assert Org.objects.get(pk=tenants.org_a.pk).served == pytest.approx(2.0)


def test_not_found_for_a_fresh_claim_waits_for_its_start(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants, state=ChartState.DISPATCHING, claimed_ago=5)
    still_running, result, after = run_settle(chart, config, Describe(None))
    assert still_running is False
    assert outcomes_of(result) == {}
    assert after.state == ChartState.DISPATCHING


def test_a_claim_without_a_workflow_id_is_not_described(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants, state=ChartState.DISPATCHING, claimed_ago=120, temporal_workflow_id="")
    describe = Describe(outcome("completed"))
    _, result, after = run_settle(chart, config, describe)
    assert describe.asked == []
    assert (after.state, result.requeued) == (ChartState.QUEUED, [chart.pk])


def test_temporal_unreachable_changes_nothing(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants)
    with pytest.raises(ConnectionError):
        run_settle(chart, config, Describe(None, error=ConnectionError("Temporal unreachable")))
    assert Chart.objects.get(pk=chart.pk).state == ChartState.RUNNING


def test_a_chart_another_pass_settled_first_is_not_settled_twice(tenants: Tenants, config: SchedulerConfig) -> None:
    chart = in_flight(tenants)
    stale = Chart.objects.get(pk=chart.pk)
    Chart.objects.filter(pk=chart.pk).update(temporal_workflow_id="chart-test-r2")  # a later run took over
    settled = settle(stale, config=config, describe=Describe(outcome("failed", failure_message="boom")))
    assert settled == Settled(still_running=False, outcome=None)
    assert Chart.objects.get(pk=chart.pk).state == ChartState.RUNNING
