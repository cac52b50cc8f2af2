"""The reconcile pass: Temporal, not a callback, is the record of what ran and how it ended.

A completion hint from a workflow only makes the pass look at that chart sooner (`reconcile_chart`).

How a run's end is read (`settle`): completed is a success; failed, timed out (the workflow's run
timeout) or lost follow the retry policy; a provider's throttle is no failure (back to the queue, no
attempt spent); a termination in Temporal is an operator's decision, so the chart fails at once.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from charts.models import IN_FLIGHT_STATES, Chart, ChartState, DurationStat, is_retry, log_spread
from charts.services import chart_workflow_closed
from charts.states import transition_if
from common import tracing
from common.actors import RECONCILER
from common.events import changed
from knobs.models import SchedulerConfig
from orgs.models import Org, Provider
from orgs.services import provider_get_or_create, provider_throttle_record
from scheduling import metrics
from scheduling.accuracy import finish_scores
from scheduling.core.durations import WARMUP_RUNS, duration_learn
from scheduling.snapshot import DURATION_STATE_FIELDS, duration_state, duration_state_write
from scheduling.temporal.client import (
    WorkflowOutcome,
    cancel_workflow,
    describe_workflow,
    list_open_workflow_ids,
    terminate_workflow,
)

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 4000
TIMED_OUT = "timed out"


# What settling one chart did to it; each names the list of `ReconcileResult` the chart is counted in.
Outcome = Literal["succeeded", "retried", "failed", "cancelled", "requeued", "throttled", "marked_running"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


@dataclass(frozen=True)
class Settled:
    """What `settle` found: whether the chart's workflow still runs, and what it did to the chart
    (None: nothing, because the run goes on, or another pass settled it first)."""

    still_running: bool
    outcome: Outcome | None = None


@dataclass(frozen=True)
class ReconcileResult:
    succeeded: list[int] = field(default_factory=list)
    retried: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    throttled: list[int] = field(default_factory=list)
    marked_running: list[int] = field(default_factory=list)
    closed_after_cancel: list[int] = field(default_factory=list)

    @classmethod
    def of(
        cls, outcomes: Iterable[tuple[int, Outcome | None]], *, closed_after_cancel: Iterable[int] = ()
    ) -> ReconcileResult:
        """The pass's result from what it did to each chart, (chart id, outcome), in the order it did it."""
        by_outcome: dict[str, list[int]] = {outcome: [] for outcome in OUTCOMES}
        for chart_id, outcome in outcomes:
            if outcome is not None:
                by_outcome[outcome].append(chart_id)
        return cls(**by_outcome, closed_after_cancel=list(closed_after_cancel))

    @property
    def finished(self) -> int:
        """Runs that ended or never began: each freed its budget units."""
        return sum(map(len, (self.succeeded, self.retried, self.failed, self.cancelled, self.requeued, self.throttled)))


def reconcile_run() -> ReconcileResult:
    """Settle every in-flight chart that Temporal no longer runs. Steps:

    1. Read the charts the database holds as dispatching or running.
    2. Ask Temporal which of our workflows still run (visibility may lag, so this only narrows the
       list: a running chart listed as open is left alone).
    3. Describe each of the others, and act on what describe says (`settle`).
    4. Make sure the workflows of cancelled charts close (`close_cancelled`).
    """
    begun = time.perf_counter()
    outcomes: list[tuple[int, Outcome | None]] = []
    with tracing.span("reconcile"):
        charts = list(Chart.objects.filter(state__in=IN_FLIGHT_STATES).select_related("org"))
        if charts:
            open_ids = list_open_workflow_ids()
            config = SchedulerConfig.load()
            for chart in charts:
                if chart.state == ChartState.RUNNING and chart.temporal_workflow_id in open_ids:
                    continue
                outcomes.append((chart.pk, settle(chart, config=config).outcome))
        result = ReconcileResult.of(outcomes, closed_after_cancel=close_cancelled())
    if result.finished or result.marked_running:
        changed(kind="reconcile", finished=result.finished)
    metrics.observe_reconcile(time.perf_counter() - begun)
    return result


def reconcile_chart(chart_id: int) -> bool:
    """Settle one chart now (after a completion hint); return whether its workflow is still running."""
    chart = Chart.objects.filter(pk=chart_id, state__in=IN_FLIGHT_STATES).select_related("org").first()
    if chart is None:
        return False
    with tracing.span("reconcile.chart", chart_id=chart.pk, org_id=chart.org_id):
        settled = settle(chart, config=SchedulerConfig.load())
    result = ReconcileResult.of([(chart.pk, settled.outcome)])
    if result.finished or result.marked_running:
        changed(kind="reconcile", finished=result.finished)
    return settled.still_running


# What Temporal says of a workflow id (its latest run), or None when it has no record of it.
Describe = Callable[[str], WorkflowOutcome | None]


def settle(chart: Chart, *, config: SchedulerConfig, describe: Describe | None = None) -> Settled:
    """Record what Temporal says of one in-flight chart; return whether its workflow still runs, and
    what the chart became (none when another pass's compare-and-swap won first).

    `describe` asks Temporal (`describe_workflow`, the default); tests pass a fake. A chart without
    a workflow id is not described: it is as Temporal having no record of it.

    - not found: a `dispatching` chart older than `dispatch_stale_after` never started (its dispatcher
      died before the start): back to `queued` at its old place, the attempt not counted; a `running`
      one that Temporal lost counts as a failed run;
    - running: a `dispatching` chart is marked `running` (its dispatcher died after the start);
    - completed: `succeeded` (the previous attempt's `last_error` cleared; the history keeps it),
      and the duration feeds the (org, workflow) statistics;
    - failed with a provider throttle: back to `queued` without spending an attempt (`_throttle`);
    - failed, or timed out (reason `timed out`): a retry with backoff, or `failed` after the last
      attempt;
    - terminated: `failed` at once, with reason `terminated in Temporal: <reason>`; terminating is
      an operator's decision, never retried;
    - canceled (from outside fairsched): `cancelled`.
    """
    workflow_id = chart.temporal_workflow_id
    outcome = (describe or describe_workflow)(workflow_id) if workflow_id else None
    now = timezone.now()
    if outcome is None:
        if chart.state == ChartState.DISPATCHING:
            stale = chart.claimed_at is None or now - chart.claimed_at > timedelta(seconds=config.dispatch_stale_after)
            return Settled(False, "requeued" if stale and _requeue(chart) else None)
        return Settled(
            False, _fail(chart, config=config, message="Temporal has no record of the workflow", kind="lost", now=now)
        )
    if outcome.status == "running":
        marked = chart.state == ChartState.DISPATCHING and transition_if(
            chart.pk,
            [ChartState.DISPATCHING],
            ChartState.RUNNING,
            actor=RECONCILER,
            reason="workflow found running",
            where={"temporal_workflow_id": workflow_id},
            temporal_run_id=outcome.run_id,
            started_at=outcome.start_time,
        )
        return Settled(True, "marked_running" if marked else None)
    if outcome.status == "completed":
        return Settled(False, _succeed(chart, outcome, lag_at_most=config.reconcile_interval))
    if outcome.status == "canceled":
        cancelled = transition_if(
            chart.pk, IN_FLIGHT_STATES, ChartState.CANCELLED, actor=RECONCILER, reason="workflow cancelled",
            where={"temporal_workflow_id": workflow_id}, finished_at=outcome.close_time or now,
        )  # fmt: skip
        return Settled(False, "cancelled" if cancelled else None)
    if outcome.throttled:
        return Settled(False, _throttle(chart, outcome, now=now))
    if outcome.status == "terminated":
        return Settled(False, _end_terminated(chart, outcome, now=outcome.close_time or now))
    message = TIMED_OUT if outcome.status == "timed_out" else outcome.failure_message or f"workflow {outcome.status}"
    return Settled(
        False, _fail(chart, config=config, message=message, kind=outcome.status, now=outcome.close_time or now)
    )


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
            runs=F("runs") - 1,  # its workflow id was never used: the next claim takes it again
            cost=None,
            service=0.0,
            claimed_at=None,
            temporal_workflow_id="",
        )
        if won and chart.service:
            Org.objects.filter(pk=chart.org_id).update(served=F("served") - chart.service)
    return won


def _succeed(chart: Chart, outcome: WorkflowOutcome, *, lag_at_most: float) -> Outcome | None:
    """A completed run: `succeeded`, its duration learned, and the ETAs it was promised scored against
    its finish (`scheduling.accuracy`), in the same statement; the metrics after. None when another
    pass settled the run first.

    The duration learned is from the run's start in Temporal to this settle, not to its close: the
    run held its budget units until now, and the plan frees a lane after the learned duration (on
    the live load run the close-to-settle lag was 0.4-0.5 s a run, and ETAs came 13-26% early where
    only the backlog drained). A lag past `lag_at_most` (one reconcile interval: the longest a loop
    that runs takes to settle a closed run) is an outage of the loop and counts only that much. Its
    finish, and the ETAs' scores, are its close."""
    now = timezone.now()
    finished = outcome.close_time or now
    settled = min(max(now, finished), finished + timedelta(seconds=lag_at_most))
    scores, outcomes = finish_scores(chart, finished=finished)
    with transaction.atomic():
        if not transition_if(
            chart.pk, IN_FLIGHT_STATES, ChartState.SUCCEEDED, actor=RECONCILER, reason="workflow completed",
            where={"temporal_workflow_id": chart.temporal_workflow_id},
            finished_at=finished, started_at=outcome.start_time, temporal_run_id=outcome.run_id, last_error="",
            **scores,
        ):  # fmt: skip
            return None
        duration_record(
            org_id=chart.org_id, workflow_id=chart.workflow_id,
            seconds=(settled - outcome.start_time).total_seconds(), started=outcome.start_time,
        )  # fmt: skip
    metrics.observe_finish(
        org=chart.org.slug,
        cost=chart.cost or 1,
        retry=is_retry(state=chart.state, attempt=chart.attempt),
        turnaround=(finished - chart.created_at).total_seconds(),
    )
    for at, scored in outcomes:
        metrics.observe_eta_outcome(org=chart.org.slug, at=at, error=scored.error, in_band=scored.in_band)
    return "succeeded"


def _fail(chart: Chart, *, config: SchedulerConfig, message: str, kind: str, now: datetime) -> Outcome | None:
    """A failed run: back to the queue after a backoff (`retried`), or `failed` after the last attempt;
    counted as a failure of `kind` by the reconcile that records it (None: another pass did)."""
    error = message[:MAX_ERROR_CHARS]
    common: dict[str, Any] = {
        "where": {"temporal_workflow_id": chart.temporal_workflow_id},
        "last_error": error,
        "cost": None,
    }
    if chart.attempt >= config.max_attempts:
        if transition_if(
            chart.pk, IN_FLIGHT_STATES, ChartState.FAILED, actor=RECONCILER,
            reason=f"attempt {chart.attempt} of {config.max_attempts} failed: {error}",
            finished_at=now, **common,
        ):  # fmt: skip
            metrics.observe_failure(org=chart.org.slug, kind=kind, cost=chart.cost or 1)
            return "failed"
        return None
    delay = retry_delay(attempt=chart.attempt, base=config.backoff_base, ceiling=config.backoff_ceiling)
    if transition_if(
        chart.pk, IN_FLIGHT_STATES, ChartState.RETRY_WAIT, actor=RECONCILER,
        reason=f"attempt {chart.attempt} failed, retry in {delay.total_seconds():.0f} s: {error}",
        available_at=timezone.now() + delay, **common,
    ):  # fmt: skip
        metrics.observe_failure(org=chart.org.slug, kind=kind, cost=chart.cost or 1)
        return "retried"
    return None


def retry_delay(*, attempt: int, base: float, ceiling: float, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff with jitter: uniform in [1/2, 1] of min(ceiling, base * 2^(attempt - 1))."""
    raw = min(ceiling, base * math.pow(2, max(0, attempt - 1)))
    return timedelta(seconds=raw * (0.5 + 0.5 * (rng or random).random()))


def duration_record(*, org_id: int, workflow_id: int, seconds: float, started: datetime | None = None) -> None:
    """Add one finished run (begun at `started`) to the (org, workflow) statistics the ETAs learn from.

    1. Lock the pair's row (made at its first run), so that two passes never add over each other.
    2. While the pair has few runs, read its workflow's over every org: what it usually takes, to tell
       an outlier by (a run across an outage of the workers made the mean of a dozen 8 s runs 54 s).
    3. Apply the pure rule (`core.durations.duration_learn`: outliers clipped, a lasting change
       followed within a few runs and told from the order of finishes by the run's start, older runs
       fading) to the row's state and write it back.
    """
    with transaction.atomic():
        stat, _ = DurationStat.objects.select_for_update().get_or_create(org_id=org_id, workflow_id=workflow_id)
        state = duration_state(stat)
        usual = _workflow_log_duration(workflow_id) if state.count < WARMUP_RUNS else None
        begun = None if started is None else started.timestamp()
        duration_state_write(stat, duration_learn(state, seconds, usual=usual, started=begun))
        stat.save(update_fields=[*DURATION_STATE_FIELDS, "updated_at"])


def _workflow_log_duration(workflow_id: int) -> tuple[float, float] | None:
    """(mean, spread) of log-duration of the workflow's runs over every org, or None under
    WARMUP_RUNS runs: too little is known to tell an outlier."""
    pooled = DurationStat.objects.filter(workflow_id=workflow_id).aggregate(
        count=Sum("count"), sum_log=Sum("sum_log"), sum_log_sq=Sum("sum_log_sq")
    )
    count, sum_log, sum_log_sq = pooled["count"] or 0, pooled["sum_log"], pooled["sum_log_sq"]
    if count < WARMUP_RUNS:
        return None
    return sum_log / count, log_spread(count=count, sum_log=sum_log, sum_log_sq=sum_log_sq) or 0.0


def _end_terminated(chart: Chart, outcome: WorkflowOutcome, *, now: datetime) -> Outcome | None:
    """A run terminated in Temporal: someone decided it must stop, so the chart fails, not retried."""
    error = f"terminated in Temporal: {outcome.failure_message or 'no reason given'}"[:MAX_ERROR_CHARS]
    if transition_if(
        chart.pk, IN_FLIGHT_STATES, ChartState.FAILED, actor=RECONCILER, reason=error,
        where={"temporal_workflow_id": chart.temporal_workflow_id},
        last_error=error, cost=None, finished_at=now,
    ):  # fmt: skip
        metrics.observe_failure(org=chart.org.slug, kind="terminated", cost=chart.cost or 1)
        return "failed"
    return None


def _throttle(chart: Chart, outcome: WorkflowOutcome, *, now: datetime) -> Outcome | None:
    """A provider throttled the run: that is no failure of the chart. Steps:

    1. The pause ends the throttle's Retry-After after the run closed, or FAIRSCHED_THROTTLE_PAUSE
       seconds after it without one.
    2. The chart goes back to `queued`, available at the pause's end, and gets its attempt back
       (`runs` still counts the run, so the next one gets a fresh workflow id); its org gets back the
       virtual time the claim added (`Chart.service`), as for an undone claim.
    3. In the same transaction, the provider (the one the throttle names, else its workflow's) is
       paused for the chart's org, and for everyone when it throttled enough orgs lately
       (`provider_throttle_record`).
    4. The throttle is counted in its own metric, apart from failures.
    """
    seconds = outcome.retry_after_seconds
    until = (outcome.close_time or now) + timedelta(
        seconds=settings.FAIRSCHED_THROTTLE_PAUSE if seconds is None else seconds
    )
    provider = _throttled_provider(chart, outcome)
    label = provider.slug if provider is not None else "its provider"
    with transaction.atomic():
        won = transition_if(
            chart.pk, IN_FLIGHT_STATES, ChartState.QUEUED, actor=RECONCILER,
            reason=f"throttled by {label}: back in the queue until {until:%H:%M:%S}, no attempt spent",
            where={"temporal_workflow_id": chart.temporal_workflow_id},
            attempt=F("attempt") - 1, cost=None, service=0.0, claimed_at=None, available_at=until,
        )  # fmt: skip
        if won and chart.service:  # no turn of its org's either: the claim's virtual time is given back
            Org.objects.filter(pk=chart.org_id).update(served=F("served") - chart.service)
        if won and provider is not None and until > timezone.now():
            provider_throttle_record(
                provider=provider,
                org=chart.org,
                until=until,
                actor=RECONCILER,
                reason="throttled (Retry-After)"
                if seconds is not None
                else "throttled (no Retry-After: default pause)",
            )
    if not won:
        return None
    metrics.observe_throttle(org=chart.org.slug, provider=provider.slug if provider is not None else "")
    return "throttled"


def _throttled_provider(chart: Chart, outcome: WorkflowOutcome) -> Provider | None:
    if outcome.provider:
        return provider_get_or_create(slug=outcome.provider)
    return Provider.objects.filter(workflows=chart.workflow_id).first()


def close_cancelled() -> list[int]:
    """Make sure the workflow of every cancelled chart closes in Temporal; return the ids of the charts
    whose request this pass settled. For each chart whose cancel request is not yet settled
    (`Chart.cancel_requested_at`):

    1. Describe its workflow.
    2. Still running within FAIRSCHED_CANCEL_GRACE seconds of the request: ask again to cancel (the
       first request may never have reached Temporal) and look again on the next pass.
    3. Still running after the grace: terminate it, and describe it again.
    4. Closed, or unknown to Temporal after the grace (a claim's start may still be on its way before
       it): settle the request, noting in the chart's history how the workflow ended.
    If Temporal cannot be reached, the error leaves the request unsettled for the next pass.
    """
    grace = timedelta(seconds=settings.FAIRSCHED_CANCEL_GRACE)
    closed: list[int] = []
    for chart in Chart.objects.filter(state=ChartState.CANCELLED, cancel_requested_at__isnull=False):
        workflow_id = chart.temporal_workflow_id
        outcome = describe_workflow(workflow_id)
        overdue = timezone.now() - (chart.cancel_requested_at or timezone.now()) > grace
        if outcome is not None and outcome.status == "running":
            if not overdue:
                cancel_workflow(workflow_id)
                continue
            terminate_workflow(
                workflow_id,
                reason=f"cancelled in fairsched; still running {grace.total_seconds():g} s after the cancel request",
            )
            outcome = describe_workflow(workflow_id)
            if outcome is not None and outcome.status == "running":
                continue
        if outcome is None and not overdue:
            continue
        how = outcome.status if outcome is not None else "never started"
        if chart_workflow_closed(chart=chart, how=how, actor=RECONCILER):
            closed.append(chart.pk)
    return closed
