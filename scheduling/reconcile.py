"""The reconcile pass: Temporal, not a callback, is the record of what ran and how it ended.

A completion hint from a workflow only makes the pass look at that chart sooner (`reconcile_chart`).
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from charts.models import Chart, ChartState, DurationStat
from charts.states import transition_if
from fairsched.actors import RECONCILER
from fairsched.events import changed
from orgs.models import Org
from orgs.services import provider_get_or_create, provider_pause
from scheduling import metrics
from scheduling.models import SchedulerConfig
from scheduling.temporal.client import WorkflowOutcome, describe_workflow, list_open_workflow_ids

logger = logging.getLogger(__name__)

IN_FLIGHT = [ChartState.DISPATCHING, ChartState.RUNNING]
FAILED_STATUSES = {"failed", "terminated", "timed_out"}
MAX_ERROR_CHARS = 4000


@dataclass
class ReconcileResult:
    succeeded: list[int] = field(default_factory=list)
    retried: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    marked_running: list[int] = field(default_factory=list)

    @property
    def finished(self) -> int:
        return len(self.succeeded) + len(self.retried) + len(self.failed) + len(self.cancelled) + len(self.requeued)


def reconcile_run() -> ReconcileResult:
    """Settle every in-flight chart that Temporal no longer runs. Steps:

    1. Read the charts the database holds as dispatching or running.
    2. Ask Temporal which of our workflows still run (visibility may lag, so this only narrows the
       list: a running chart listed as open is left alone).
    3. Describe each of the others, and act on what describe says (`settle`).
    """
    result = ReconcileResult()
    charts = list(Chart.objects.filter(state__in=IN_FLIGHT).select_related("org"))
    if not charts:
        return result
    open_ids = list_open_workflow_ids()
    config = SchedulerConfig.load()
    for chart in charts:
        if chart.state == ChartState.RUNNING and chart.temporal_workflow_id in open_ids:
            continue
        settle(chart, config=config, result=result)
    if result.finished or result.marked_running:
        changed(kind="reconcile", finished=result.finished)
    return result


def reconcile_chart(chart_id: int) -> bool:
    """Settle one chart now (after a completion hint); return whether its workflow is still running."""
    chart = Chart.objects.filter(pk=chart_id, state__in=IN_FLIGHT).select_related("org").first()
    if chart is None:
        return False
    result = ReconcileResult()
    still_running = settle(chart, config=SchedulerConfig.load(), result=result)
    if result.finished or result.marked_running:
        changed(kind="reconcile", finished=result.finished)
    return still_running


def settle(chart: Chart, *, config: SchedulerConfig, result: ReconcileResult) -> bool:
    """Record what Temporal says of one in-flight chart; return whether its workflow still runs.

    - not found: a `dispatching` chart older than `dispatch_stale_after` never started (its dispatcher
      died before the start): back to `queued` at its old place, the attempt not counted; a `running`
      one that Temporal lost counts as a failed run;
    - running: a `dispatching` chart is marked `running` (its dispatcher died after the start);
    - completed: `succeeded`, and the duration feeds the (org, workflow) statistics;
    - failed, terminated, timed out: a retry with backoff, or `failed` after the last attempt; a
      provider throttle also pauses that provider for the chart's org until its Retry-After;
    - canceled (from outside fairsched): `cancelled`.
    """
    workflow_id = chart.temporal_workflow_id
    outcome = describe_workflow(workflow_id) if workflow_id else None
    now = timezone.now()
    if outcome is None:
        if chart.state == ChartState.DISPATCHING:
            stale = chart.claimed_at is None or now - chart.claimed_at > timedelta(seconds=config.dispatch_stale_after)
            if stale and _requeue(chart):
                result.requeued.append(chart.pk)
            return False
        _fail(chart, config=config, message="Temporal has no record of the workflow", result=result, now=now)
        return False
    if outcome.status == "running":
        if chart.state == ChartState.DISPATCHING and transition_if(
            chart.pk,
            [ChartState.DISPATCHING],
            ChartState.RUNNING,
            actor=RECONCILER,
            reason="workflow found running",
            where={"temporal_workflow_id": workflow_id},
            temporal_run_id=outcome.run_id,
            started_at=outcome.start_time,
        ):
            result.marked_running.append(chart.pk)
        return True
    if outcome.status == "completed":
        _succeed(chart, outcome, result)
    elif outcome.status == "canceled":
        if transition_if(
            chart.pk, IN_FLIGHT, ChartState.CANCELLED, actor=RECONCILER, reason="workflow cancelled",
            where={"temporal_workflow_id": workflow_id}, finished_at=outcome.close_time or now,
        ):  # fmt: skip
            result.cancelled.append(chart.pk)
    else:
        if outcome.retry_after_seconds and outcome.provider:
            _pause_provider(chart, outcome)
        message = outcome.failure_message or f"workflow {outcome.status}"
        _fail(chart, config=config, message=message, result=result, now=outcome.close_time or now)
    return False


def _requeue(chart: Chart) -> bool:
    """A claim whose workflow never started is undone: the chart goes back to its place, the attempt
    is not counted, and its org gets back exactly the virtual time the claim had added (recorded on the
    chart by `dispatch._claim`, whatever its weight or the policy has become since)."""
    with transaction.atomic():
        won = transition_if(
            chart.pk,
            [ChartState.DISPATCHING],
            ChartState.QUEUED,
            actor=RECONCILER,
            reason="claimed but never started",
            where={"temporal_workflow_id": chart.temporal_workflow_id},
            attempt=F("attempt") - 1,
            cost=None,
            service=0.0,
            claimed_at=None,
            temporal_workflow_id="",
        )
        if won and chart.service:
            Org.objects.filter(pk=chart.org_id).update(served=F("served") - chart.service)
    return won


def _succeed(chart: Chart, outcome: WorkflowOutcome, result: ReconcileResult) -> None:
    finished = outcome.close_time or timezone.now()
    with transaction.atomic():
        if not transition_if(
            chart.pk, IN_FLIGHT, ChartState.SUCCEEDED, actor=RECONCILER, reason="workflow completed",
            where={"temporal_workflow_id": chart.temporal_workflow_id},
            finished_at=finished, started_at=outcome.start_time, temporal_run_id=outcome.run_id,
        ):  # fmt: skip
            return
        duration_record(
            org_id=chart.org_id, workflow_id=chart.workflow_id, seconds=(finished - outcome.start_time).total_seconds()
        )
    result.succeeded.append(chart.pk)
    metrics.observe_finish(org=chart.org.slug, cost=chart.cost or 1, retry=chart.attempt > 1)


def _fail(chart: Chart, *, config: SchedulerConfig, message: str, result: ReconcileResult, now: datetime) -> None:
    """A failed run: back to the queue after a backoff, or `failed` after the last attempt."""
    error = message[:MAX_ERROR_CHARS]
    common: dict[str, Any] = {
        "where": {"temporal_workflow_id": chart.temporal_workflow_id},
        "last_error": error,
        "cost": None,
    }
    if chart.attempt >= config.max_attempts:
        if transition_if(
            chart.pk, IN_FLIGHT, ChartState.FAILED, actor=RECONCILER,
            reason=f"attempt {chart.attempt} of {config.max_attempts} failed: {error}",
            finished_at=now, **common,
        ):  # fmt: skip
            result.failed.append(chart.pk)
        return
    delay = retry_delay(attempt=chart.attempt, base=config.backoff_base, ceiling=config.backoff_ceiling)
    if transition_if(
        chart.pk, IN_FLIGHT, ChartState.RETRY_WAIT, actor=RECONCILER,
        reason=f"attempt {chart.attempt} failed, retry in {delay.total_seconds():.0f} s: {error}",
        available_at=timezone.now() + delay, **common,
    ):  # fmt: skip
        result.retried.append(chart.pk)


def retry_delay(*, attempt: int, base: float, ceiling: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with jitter: uniform in [1/2, 1] of min(ceiling, base * 2^(attempt - 1))."""
    raw = min(ceiling, base * math.pow(2, max(0, attempt - 1)))
    return timedelta(seconds=raw * (0.5 + 0.5 * (rng or random).random()))


def duration_record(*, org_id: int, workflow_id: int, seconds: float) -> None:
    """Add one finished run to the (org, workflow) statistics the ETAs learn from."""
    seconds = max(seconds, 0.001)
    log = math.log(seconds)
    DurationStat.objects.get_or_create(org_id=org_id, workflow_id=workflow_id)
    DurationStat.objects.filter(org_id=org_id, workflow_id=workflow_id).update(
        count=F("count") + 1,
        total_seconds=F("total_seconds") + seconds,
        sum_log=F("sum_log") + log,
        sum_log_sq=F("sum_log_sq") + log * log,
        updated_at=timezone.now(),
    )


def _pause_provider(chart: Chart, outcome: WorkflowOutcome) -> None:
    """A throttled provider is paused for the chart's org until its Retry-After."""
    provider_pause(
        provider=provider_get_or_create(slug=outcome.provider or ""),
        org=chart.org,
        until=timezone.now() + timedelta(seconds=outcome.retry_after_seconds or 0),
        actor=RECONCILER,
        reason="throttled (Retry-After)",
    )
