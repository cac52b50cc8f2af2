"""How the reconcile pass reads a run's end, on PostgreSQL with a fake Temporal: throttles are not
failures, timeouts follow the retry policy, terminations fail the chart, a success clears the last
error, and a cancelled chart's workflow is cancelled, then terminated after the grace, until closed.

The same outcomes on the real Temporal dev server are in `test_outcomes.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartState
from charts.services import ChartRequest, chart_cancel, chart_submit_bulk
from common.actors import RECONCILER, Actor
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.models import Org, ProviderPause, Workflow
from scheduling import dispatch as dispatch_module
from scheduling import metrics
from scheduling import reconcile as reconcile_module
from scheduling.dispatch import dispatch_run
from scheduling.reconcile import reconcile_run, settle
from scheduling.replan import plan_refresh
from scheduling.temporal.client import WorkflowOutcome
from tests.conftest import Tenants
from tests.factories import OrgFactory, ProviderFactory

pytestmark = pytest.mark.django_db
ACTOR = Actor("user:test", staff=True)


@dataclass
class FakeTemporal:
    """Workflows by id: started ones run until the test closes them; cancels and terminates are noted."""

    outcomes: dict[str, WorkflowOutcome] = field(default_factory=dict)
    started: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)
    terminates: list[tuple[str, str]] = field(default_factory=list)
    reachable: bool = True

    def start(self, **start: Any) -> str:
        self.started.append(start)
        self.outcomes[start["workflow_id"]] = WorkflowOutcome(
            "running", f"run-{len(self.started)}", timezone.now(), None
        )
        return f"run-{len(self.started)}"

    def describe(self, workflow_id: str) -> WorkflowOutcome | None:
        if not self.reachable:
            raise ConnectionError("Temporal unreachable")
        return self.outcomes.get(workflow_id)

    def close(self, workflow_id: str, status: str, **details: Any) -> None:
        running = self.outcomes[workflow_id]
        self.outcomes[workflow_id] = WorkflowOutcome(
            status, running.run_id, running.start_time, timezone.now(), **details
        )

    def cancel(self, workflow_id: str) -> None:
        self.cancels.append(workflow_id)

    def terminate(self, workflow_id: str, *, reason: str) -> None:
        self.terminates.append((workflow_id, reason))
        if workflow_id in self.outcomes:
            self.close(workflow_id, "terminated", failure_message=reason)


@pytest.fixture
def temporal(monkeypatch: pytest.MonkeyPatch, announced: Any) -> FakeTemporal:
    fake = FakeTemporal()
    monkeypatch.setattr(dispatch_module, "start_chart_workflow", fake.start)
    monkeypatch.setattr(reconcile_module, "describe_workflow", fake.describe)
    monkeypatch.setattr(reconcile_module, "list_open_workflow_ids", lambda: set())
    monkeypatch.setattr(reconcile_module, "cancel_workflow", fake.cancel)
    monkeypatch.setattr(reconcile_module, "terminate_workflow", fake.terminate)
    return fake


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    client = metrics._redis()
    for key in client.scan_iter(f"{metrics.PREFIX}*"):
        client.delete(key)


def submit(org: Org, workflow: Workflow, count: int = 1, *, prefix: str = "c") -> list[Chart]:
    items = [ChartRequest(workflow.name, f"{prefix}{i}") for i in range(count)]
    return [chart for chart, _ in chart_submit_bulk(org=org, items=items, actor=ACTOR)]


def start(chart: Chart) -> Chart:
    """Make the chart available, plan and dispatch: it runs (in the fake Temporal)."""
    Chart.objects.filter(pk=chart.pk).update(available_at=None)
    ProviderPause.objects.all().delete()
    plan_refresh()
    assert chart.pk in dispatch_run().started
    return Chart.objects.get(pk=chart.pk)


def throttle(chart: Chart, temporal: FakeTemporal, **details: Any) -> Chart:
    temporal.close(
        chart.temporal_workflow_id, "failed", failure_message="ProviderThrottled: slow down", throttled=True, **details
    )
    reconcile_run()
    return Chart.objects.get(pk=chart.pk)


def counters(name: str) -> dict[str, int]:
    raw = metrics._redis().hgetall(f"{metrics.PREFIX}{name}")
    return {key.decode(): int(value) for key, value in raw.items()}  # type: ignore[union-attr]


def close_to(moment: datetime | None, expected: datetime) -> bool:
    return moment is not None and abs((moment - expected).total_seconds()) < 5


# throttles


def test_a_throttle_requeues_without_spending_an_attempt(tenants: Tenants, temporal: FakeTemporal) -> None:
    scheduler_config_set(actor=ACTOR, max_attempts=3)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    assert (running.attempt, running.runs) == (1, 1)

    throttled = throttle(running, temporal, retry_after_seconds=42.0, provider="gpu-east")

    assert throttled.state == ChartState.QUEUED
    assert (throttled.attempt, throttled.runs) == (0, 1)
    assert throttled.cost is None
    assert throttled.last_error == ""
    assert close_to(throttled.available_at, timezone.now() + timedelta(seconds=42))
    (pause,) = ProviderPause.objects.all()
    assert (pause.provider.slug, pause.org, pause.created_by) == ("gpu-east", tenants.org_a, RECONCILER.name)
    assert pause.until == throttled.available_at
    event = ChartEvent.objects.filter(chart=chart).last()
    assert event is not None
    assert (event.from_state, event.to_state) == (ChartState.RUNNING, ChartState.QUEUED)
    assert "throttled by gpu-east" in event.reason
    assert "no attempt spent" in event.reason
    assert counters("throttled_runs") == {"acme|gpu-east": 1}
    assert counters("failed_runs") == {}


def test_a_throttle_gives_back_the_service_its_claim_added(tenants: Tenants, temporal: FakeTemporal) -> None:
    """A throttled run is no turn of its org's: the virtual time its claim added is given back."""
    (chart,) = submit(tenants.org_a, tenants.workflow)
    before = Org.objects.get(pk=tenants.org_a.pk).served
    running = start(chart)
    assert running.service > 0
    assert Org.objects.get(pk=tenants.org_a.pk).served == pytest.approx(before + running.service)

    throttled = throttle(running, temporal, retry_after_seconds=5.0)

    assert throttled.service == 0.0
    assert Org.objects.get(pk=tenants.org_a.pk).served == pytest.approx(before)


def test_many_throttles_never_fail_the_chart_and_each_run_has_its_own_id(
    tenants: Tenants, temporal: FakeTemporal
) -> None:
    scheduler_config_set(actor=ACTOR, max_attempts=2)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    for _ in range(4):
        chart = throttle(start(chart), temporal, retry_after_seconds=1.0, provider="gpu-east")
        assert chart.state == ChartState.QUEUED
        assert chart.attempt == 0

    finished = start(chart)
    temporal.close(finished.temporal_workflow_id, "completed")
    reconcile_run()

    done = Chart.objects.get(pk=chart.pk)
    assert done.state == ChartState.SUCCEEDED
    assert (done.attempt, done.runs) == (1, 5)
    ids = [started["workflow_id"] for started in temporal.started]
    assert len(set(ids)) == 5
    assert ids[-1] == done.temporal_workflow_id
    assert counters("throttled_runs") == {"acme|gpu-east": 4}


def test_a_throttled_retry_keeps_the_attempts_it_spent(tenants: Tenants, temporal: FakeTemporal) -> None:
    scheduler_config_set(actor=ACTOR, max_attempts=2, backoff_base=0, backoff_ceiling=0)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    first = start(chart)
    temporal.close(first.temporal_workflow_id, "failed", failure_message="boom")
    reconcile_run()
    assert Chart.objects.get(pk=chart.pk).state == ChartState.RETRY_WAIT

    throttled = throttle(start(chart), temporal, retry_after_seconds=1.0)
    assert (throttled.state, throttled.attempt, throttled.runs) == (ChartState.QUEUED, 1, 2)
    assert throttled.last_error == "boom"

    second = start(throttled)
    assert second.attempt == 2
    temporal.close(second.temporal_workflow_id, "failed", failure_message="boom again")
    reconcile_run()
    assert Chart.objects.get(pk=chart.pk).state == ChartState.FAILED


def test_a_throttle_without_retry_after_or_provider_uses_the_defaults(
    tenants: Tenants, temporal: FakeTemporal, settings: Any
) -> None:
    settings.FAIRSCHED_THROTTLE_PAUSE = 90.0
    provider = ProviderFactory(slug="geo-api")
    Workflow.objects.filter(pk=tenants.workflow.pk).update(provider=provider)
    (chart,) = submit(tenants.org_a, tenants.workflow)

    throttled = throttle(start(chart), temporal)

    assert throttled.state == ChartState.QUEUED
    assert close_to(throttled.available_at, timezone.now() + timedelta(seconds=90))
    (pause,) = ProviderPause.objects.all()
    assert (pause.provider, pause.org) == (provider, tenants.org_a)
    assert counters("throttled_runs") == {"acme|geo-api": 1}


def test_a_throttle_with_no_provider_at_all_still_requeues(tenants: Tenants, temporal: FakeTemporal) -> None:
    (chart,) = submit(tenants.org_a, tenants.workflow)
    throttled = throttle(start(chart), temporal, retry_after_seconds=5.0)
    assert (throttled.state, throttled.attempt) == (ChartState.QUEUED, 0)
    assert not ProviderPause.objects.exists()
    assert counters("throttled_runs") == {"acme|": 1}


def test_a_provider_throttling_two_orgs_within_the_window_is_paused_for_everyone(
    tenants: Tenants, temporal: FakeTemporal, settings: Any
) -> None:
    settings.FAIRSCHED_THROTTLE_SPREAD_ORGS = 2
    settings.FAIRSCHED_THROTTLE_SPREAD_WINDOW = 60.0
    (first,) = submit(tenants.org_a, tenants.workflow, prefix="a")
    (second,) = submit(tenants.org_b, tenants.workflow, prefix="b")
    scheduler_config_set(actor=ACTOR, budget=2)
    plan_refresh()
    dispatch_run()
    first, second = Chart.objects.get(pk=first.pk), Chart.objects.get(pk=second.pk)

    throttle(first, temporal, retry_after_seconds=30.0, provider="gpu-east")
    assert not ProviderPause.objects.filter(org__isnull=True).exists()  # one org: that org's limit

    throttle(second, temporal, retry_after_seconds=40.0, provider="gpu-east")
    wide = ProviderPause.objects.get(org__isnull=True)
    assert wide.provider.slug == "gpu-east"
    assert close_to(wide.until, timezone.now() + timedelta(seconds=40))
    assert "2 orgs" in wide.reason
    assert ProviderPause.objects.filter(org__isnull=False).count() == 2

    # A third org's chart of that provider now waits for the pause for everyone.
    third_org = OrgFactory(slug="gamma")
    (third,) = submit(third_org, tenants.workflow, prefix="g")
    Workflow.objects.filter(pk=tenants.workflow.pk).update(provider=wide.provider)
    plan_refresh()
    dispatch_run()
    assert Chart.objects.get(pk=third.pk).state == ChartState.QUEUED


def test_throttles_of_two_orgs_far_apart_pause_only_each_org(
    tenants: Tenants, temporal: FakeTemporal, settings: Any
) -> None:
    settings.FAIRSCHED_THROTTLE_SPREAD_WINDOW = 60.0
    (first,) = submit(tenants.org_a, tenants.workflow, prefix="a")
    first = throttle(start(first), temporal, retry_after_seconds=30.0, provider="gpu-east")
    ProviderPause.objects.update(created_at=timezone.now() - timedelta(seconds=120))
    pauses = list(ProviderPause.objects.values_list("pk", flat=True))
    (second,) = submit(tenants.org_b, tenants.workflow, prefix="b")
    plan_refresh()
    assert second.pk in dispatch_run().started
    throttle(Chart.objects.get(pk=second.pk), temporal, retry_after_seconds=30.0, provider="gpu-east")

    assert ProviderPause.objects.exclude(pk__in=pauses).count() == 1
    assert not ProviderPause.objects.filter(org__isnull=True).exists()


# timeouts, terminations, failures, successes


def test_a_timed_out_run_follows_the_retry_policy(tenants: Tenants, temporal: FakeTemporal) -> None:
    scheduler_config_set(actor=ACTOR, max_attempts=2, backoff_base=0, backoff_ceiling=0)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    temporal.close(running.temporal_workflow_id, "timed_out", failure_message="Workflow timed out")
    reconcile_run()
    waiting = Chart.objects.get(pk=chart.pk)
    assert (waiting.state, waiting.last_error) == (ChartState.RETRY_WAIT, "timed out")

    again = start(waiting)
    temporal.close(again.temporal_workflow_id, "timed_out", failure_message="Workflow timed out")
    reconcile_run()
    failed = Chart.objects.get(pk=chart.pk)
    assert (failed.state, failed.attempt, failed.last_error) == (ChartState.FAILED, 2, "timed out")
    assert failed.events.last().reason == "attempt 2 of 2 failed: timed out"  # type: ignore[union-attr]
    assert counters("failed_runs") == {"acme|timed_out": 2}


def test_a_run_terminated_in_temporal_fails_the_chart_without_retry(tenants: Tenants, temporal: FakeTemporal) -> None:
    scheduler_config_set(actor=ACTOR, max_attempts=3)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    temporal.close(running.temporal_workflow_id, "terminated", failure_message="operator: wrong input file")
    reconcile_run()

    failed = Chart.objects.get(pk=chart.pk)
    assert (failed.state, failed.attempt) == (ChartState.FAILED, 1)
    assert failed.last_error == "terminated in Temporal: operator: wrong input file"
    assert failed.cost is None
    assert failed.finished_at is not None
    assert failed.events.last().reason == "terminated in Temporal: operator: wrong input file"  # type: ignore[union-attr]
    assert counters("failed_runs") == {"acme|terminated": 1}


def test_a_success_clears_the_last_error_and_the_history_keeps_it(tenants: Tenants, temporal: FakeTemporal) -> None:
    scheduler_config_set(actor=ACTOR, max_attempts=2, backoff_base=0, backoff_ceiling=0)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    first = start(chart)
    temporal.close(first.temporal_workflow_id, "failed", failure_message="DemoFailure: disk full")
    reconcile_run()
    assert Chart.objects.get(pk=chart.pk).last_error == "DemoFailure: disk full"

    second = start(chart)
    temporal.close(second.temporal_workflow_id, "completed")
    reconcile_run()

    done = Chart.objects.get(pk=chart.pk)
    assert (done.state, done.last_error) == (ChartState.SUCCEEDED, "")
    assert any("DemoFailure: disk full" in reason for reason in done.events.values_list("reason", flat=True))
    assert counters("failed_runs") == {"acme|failed": 1}


def test_a_success_counts_its_turnaround_from_submission(tenants: Tenants, temporal: FakeTemporal) -> None:
    """The turnaround histogram (`fairsched_turnaround_seconds`) counts finish - submission."""
    (chart,) = submit(tenants.org_a, tenants.workflow)
    Chart.objects.filter(pk=chart.pk).update(created_at=timezone.now() - timedelta(minutes=20))
    running = start(chart)
    temporal.close(running.temporal_workflow_id, "completed")
    reconcile_run()

    raw = metrics._redis().hgetall(f"{metrics.PREFIX}hist:turnaround")
    turnaround = {key.decode(): float(value) for key, value in raw.items()}  # type: ignore[union-attr]
    assert turnaround["acme|count"] == 1
    assert turnaround["acme|1800"] == 1
    assert 1200 <= turnaround["acme|sum"] < 1260


# cancelling a chart whose workflow runs


def test_a_cancelled_chart_s_workflow_is_cancelled_then_terminated_after_the_grace(
    tenants: Tenants,
    temporal: FakeTemporal,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.FAIRSCHED_CANCEL_GRACE = 30.0
    cancelled: list[str] = []
    monkeypatch.setattr("charts.services._cancel_workflow", cancelled.append)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    workflow_id = running.temporal_workflow_id
    with django_capture_on_commit_callbacks(execute=True):
        chart_cancel(chart=running, actor=ACTOR)
    assert cancelled == [workflow_id]
    requested = Chart.objects.get(pk=chart.pk)
    assert requested.state == ChartState.CANCELLED
    assert requested.cancel_requested_at is not None

    reconcile_run()  # within the grace, the workflow ignores the cancel: asked again
    assert temporal.cancels == [workflow_id]
    assert temporal.terminates == []
    assert Chart.objects.get(pk=chart.pk).cancel_requested_at is not None

    Chart.objects.filter(pk=chart.pk).update(cancel_requested_at=timezone.now() - timedelta(seconds=31))
    result = reconcile_run()
    assert [terminated for terminated, _ in temporal.terminates] == [workflow_id]
    assert "cancelled in fairsched" in temporal.terminates[0][1]
    assert result.closed_after_cancel == [chart.pk]
    settled = Chart.objects.get(pk=chart.pk)
    assert settled.cancel_requested_at is None
    assert settled.events.last().reason == "workflow closed in Temporal: terminated"  # type: ignore[union-attr]

    reconcile_run()  # settled: nothing more to do
    assert len(temporal.terminates) == 1


def test_a_cancel_that_closes_in_time_is_confirmed_without_terminating(
    tenants: Tenants, temporal: FakeTemporal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("charts.services._cancel_workflow", lambda workflow_id: None)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    chart_cancel(chart=running, actor=ACTOR)
    temporal.close(running.temporal_workflow_id, "canceled")

    assert reconcile_run().closed_after_cancel == [chart.pk]
    assert temporal.terminates == []
    assert Chart.objects.get(pk=chart.pk).events.last().reason == "workflow closed in Temporal: canceled"  # type: ignore[union-attr]


def test_cancelling_a_waiting_chart_asks_temporal_nothing(
    tenants: Tenants, temporal: FakeTemporal, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retry waiting for its backoff still names its last (closed) workflow: nothing to cancel."""
    scheduler_config_set(actor=ACTOR, max_attempts=2, backoff_base=60, backoff_ceiling=60)
    cancelled: list[str] = []
    monkeypatch.setattr("charts.services._cancel_workflow", cancelled.append)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    first = start(chart)
    temporal.close(first.temporal_workflow_id, "failed", failure_message="boom")
    reconcile_run()
    with django_capture_on_commit_callbacks(execute=True):
        chart_cancel(chart=Chart.objects.get(pk=chart.pk), actor=ACTOR)
    assert cancelled == []
    assert Chart.objects.get(pk=chart.pk).cancel_requested_at is None


def test_the_cancel_is_retried_while_temporal_is_unreachable(
    tenants: Tenants, temporal: FakeTemporal, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(workflow_id: str) -> None:
        raise ConnectionError("Temporal unreachable")

    monkeypatch.setattr("charts.services._cancel_workflow", unreachable)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    with django_capture_on_commit_callbacks(execute=True):
        cancelled = chart_cancel(chart=running, actor=ACTOR)  # the failed cancel is logged, not raised
    assert cancelled.state == ChartState.CANCELLED

    temporal.reachable = False
    with pytest.raises(ConnectionError):
        reconcile_run()
    assert Chart.objects.get(pk=chart.pk).cancel_requested_at is not None

    temporal.reachable = True
    reconcile_run()
    assert temporal.cancels == [running.temporal_workflow_id]
    temporal.close(running.temporal_workflow_id, "canceled")
    assert reconcile_run().closed_after_cancel == [chart.pk]
    assert Chart.objects.get(pk=chart.pk).cancel_requested_at is None


def test_a_claim_cancelled_before_its_start_is_settled_after_the_grace(
    tenants: Tenants, temporal: FakeTemporal, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A dispatching chart's workflow may not have started yet: unknown to Temporal is not closed
    until the grace has passed."""
    settings.FAIRSCHED_CANCEL_GRACE = 30.0
    monkeypatch.setattr("charts.services._cancel_workflow", lambda workflow_id: None)
    monkeypatch.setattr(dispatch_module, "_start", lambda chart: False)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    plan_refresh()
    dispatch_run()
    claimed = Chart.objects.get(pk=chart.pk)
    assert claimed.state == ChartState.DISPATCHING
    chart_cancel(chart=claimed, actor=ACTOR)

    assert reconcile_run().closed_after_cancel == []
    Chart.objects.filter(pk=chart.pk).update(cancel_requested_at=timezone.now() - timedelta(seconds=31))
    assert reconcile_run().closed_after_cancel == [chart.pk]
    assert Chart.objects.get(pk=chart.pk).events.last().reason == "workflow closed in Temporal: never started"  # type: ignore[union-attr]


def test_a_claim_that_never_started_gives_its_run_back_and_the_next_claim_reuses_the_id(
    tenants: Tenants, temporal: FakeTemporal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repeated id is what keeps a late start of the first claim from running the chart twice."""
    scheduler_config_set(actor=ACTOR, dispatch_stale_after=1)
    (chart,) = submit(tenants.org_a, tenants.workflow)
    with monkeypatch.context() as patched:
        patched.setattr(dispatch_module, "_start", lambda chart: False)
        plan_refresh()
        dispatch_run()
    claimed = Chart.objects.get(pk=chart.pk)
    Chart.objects.filter(pk=chart.pk).update(claimed_at=timezone.now() - timedelta(seconds=2))

    assert reconcile_run().requeued == [chart.pk]
    requeued = Chart.objects.get(pk=chart.pk)
    assert (requeued.state, requeued.attempt, requeued.runs) == (ChartState.QUEUED, 0, 0)

    assert start(requeued).temporal_workflow_id == claimed.temporal_workflow_id


def test_two_reconciles_of_one_run_count_one_failure(tenants: Tenants, temporal: FakeTemporal) -> None:
    """A completion hint and the periodic pass may settle the same run at once: only the winner counts."""
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    temporal.close(running.temporal_workflow_id, "terminated", failure_message="stop")
    config = SchedulerConfig.load()
    first = settle(running, config=config)
    second = settle(running, config=config)  # the same stale row: its compare-and-swap loses

    assert (first.outcome, second.outcome) == ("failed", None)
    assert counters("failed_runs") == {"acme|terminated": 1}
