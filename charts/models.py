"""Charts (jobs), their event log and the duration statistics the ETAs learn from."""

from __future__ import annotations

import math

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from common.txid import CurrentTransactionId
from orgs.models import Org, Workflow


class ChartState(models.TextChoices):
    QUEUED = "queued", "Queued"
    PAUSED = "paused", "Paused"
    DISPATCHING = "dispatching", "Dispatching"
    RUNNING = "running", "Running"
    RETRY_WAIT = "retry_wait", "Waiting to retry"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# The chart state groups, defined here once; every app, page and pass uses these names. "Queued" is
# one state; "waiting" is any of these three, "claimable" the two the dispatcher may start.
# Waiting: submitted, not yet started (paused ones too). The queue limit counts them; the snapshot
# reads them as the core's queued charts (`Scenario.queued`).
WAITING_STATES = (ChartState.QUEUED, ChartState.PAUSED, ChartState.RETRY_WAIT)
# The waiting states that hold a place in the fair order and that the dispatcher claims from (a paused
# chart has no place).
CLAIMABLE_STATES = (ChartState.QUEUED, ChartState.RETRY_WAIT)
# Claimed or running: holding budget units, watched by reconcile.
IN_FLIGHT_STATES = (ChartState.DISPATCHING, ChartState.RUNNING)
# Not yet finished: in the queue or in flight.
ACTIVE_STATES = (*WAITING_STATES, *IN_FLIGHT_STATES)
TERMINAL_STATES = (ChartState.SUCCEEDED, ChartState.FAILED, ChartState.CANCELLED)


def is_retry(*, state: str, attempt: int) -> bool:
    """Whether a chart's run is (or, for a chart in the queue, its next run will be) a retry: a run
    after the chart's first attempt. This is what the retry budget limits (`SchedulerConfig.retry_budget`).
    Not to be confused with `retry_wait`, the state of a chart waiting out the backoff after a failed
    attempt, nor with `SchedulerConfig.max_attempts`, the retry policy."""
    return attempt > attempts_before_retry(state)


def attempts_before_retry(state: str) -> int:
    """How many attempts a chart in `state` may have spent and still not be a retry (`is_retry`).

    `Chart.attempt` counts the attempts spent, the one in flight included (a throttled run gives its
    attempt back): a chart in the queue retries once it has spent one, an in-flight chart's run is a
    retry from its second attempt. (Whole columns compare against this once, not per chart.)
    """
    return 1 if state in IN_FLIGHT_STATES else 0


class WaitingReason(models.TextChoices):
    """Why a waiting chart (queued, paused, retry_wait) is not running now: the verdict of the replan's
    walk at its instant (`scheduling.core.dispatcher.Verdict`, named by `scheduling.reasons`), with
    the core's `unavailable` told apart into `backoff` and `provider_paused`, and `not_yet_planned`
    for a chart no replan has seen yet.

    Two times go with it:
    - `waiting_until`: when the reason lifts, as far as the last replan knows. `backoff`: the end of
      the chart's retry backoff; `provider_paused`: the later of that and the end of the provider's
      pause (for everyone or for the chart's org); `budget`, `turn`, `org_cap`, `retry_budget`: the
      chart's predicted start (the replay's); null for `org_held`, `chart_paused`,
      `not_yet_planned` and a chart that can never start (nothing lifts those on its own).
    - `available_at` (a column of the chart): the end of its own retry backoff, whatever else holds
      it; null when it has none.
    """

    BUDGET = "budget", "Waiting for capacity"
    TURN = "turn", "Waiting for its turn"
    ORG_CAP = "org_cap", "At the organisation's concurrency cap"
    PROVIDER_PAUSED = "provider_paused", "Waiting for the provider's rate limit"
    BACKOFF = "backoff", "Retrying after a failure"
    RETRY_BUDGET = "retry_budget", "Waiting for the retry budget"
    ORG_HELD = "org_held", "Organisation on hold"
    CHART_PAUSED = "chart_paused", "Paused"
    NOT_YET_PLANNED = "not_yet_planned", "Not yet planned"


# The plan of a chart, kept in `ChartPlan` and read as if it were the chart's own fields.
PLAN_FIELDS = (
    "position",
    "predicted_start",
    "eta",
    "eta_low",
    "eta_high",
    "waiting_reason",
    "waiting_until",
    "head_of_line",
    "expected_duration",
    "late_chance",
)


class ChartManager(models.Manager["Chart"]):
    """Charts with their plan joined in: `position`, `predicted_start`, `eta`, `eta_low`, `eta_high`,
    `waiting_reason`, `waiting_until`, `head_of_line`, `expected_duration`, `late_chance` can be read, filtered and
    ordered on as if they were columns of the chart."""

    def get_queryset(self) -> models.QuerySet[Chart]:
        return super().get_queryset().annotate(**{name: F(f"plan__{name}") for name in PLAN_FIELDS})


class Chart(models.Model):
    """One job of one org. `state` changes only through `charts.states.transition` and friends.

    Its plan (place in the fair order, predicted start, ETA and band) lives in `ChartPlan`, which the
    replan pass rewrites whole every few seconds: keeping it out of this table spares the chart rows
    (and their many indexes) a rewrite per replan, and spares dispatch and submissions any wait on
    locks the replan would otherwise hold on them. Rows lock with `select_for_update(of=("self",))`.
    """

    # No index of its own: the unique (org, external id) and the active (org, state) indexes lead with
    # it. One index fewer for every submitted chart to write.
    org = models.ForeignKey(Org, on_delete=models.PROTECT, related_name="charts", db_index=False)
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="charts")
    external_id = models.CharField(max_length=200, help_text="The submitter's id, unique within the org.")
    payload = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=ChartState.choices, default=ChartState.QUEUED, editable=False)
    high_priority = models.BooleanField(default=False)
    priority = models.IntegerField(default=0, help_text="Tenant priority inside the org; higher goes first.")
    created_at = models.DateTimeField(default=timezone.now)  # indexed by chart_created_at_idx (Meta)
    available_at = models.DateTimeField(null=True, blank=True, help_text="Not dispatched before (retry backoff).")
    attempt = models.PositiveIntegerField(
        default=0, help_text="Attempts spent so far (a run that its provider throttled spends none)."
    )
    # A database default too, so that inserts that do not name it (a COPY, the previous release
    # during a deploy) still work.
    runs = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Workflow runs claimed so far, throttled ones too: each gets its own workflow id.",
    )
    last_error = models.TextField(blank=True)
    cost = models.PositiveIntegerField(null=True, blank=True, help_text="Budget units held while in flight.")
    service = models.FloatField(
        default=0.0, editable=False, help_text="Rounds its claim added to its org's virtual time (undone: given back)."
    )
    temporal_workflow_id = models.CharField(max_length=200, blank=True)
    temporal_run_id = models.CharField(max_length=200, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the chart's workflow was asked to cancel; cleared once Temporal confirms it closed.",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Its turnaround promise: given at submit, else submitted + its org's (or its workflow's) turnaround.
    due_at = models.DateTimeField(
        null=True, blank=True, help_text="When the chart is promised finished (empty: no promise)."
    )
    # The ETA it was promised at its start, kept to measure how good the promises were
    # (`scheduling.accuracy`): from the plan its last claim was made by (the claim's time is
    # `claimed_at`); its promise at enqueue is its `ChartPromise`. At its success, the error of each
    # and whether it landed in its band.
    eta_at_start = models.DateTimeField(null=True, blank=True, editable=False)
    eta_low_at_start = models.DateTimeField(null=True, blank=True, editable=False)
    eta_high_at_start = models.DateTimeField(null=True, blank=True, editable=False)
    eta_error_at_enqueue = models.FloatField(
        null=True, blank=True, editable=False, help_text="|finish - ETA| / (finish - time of the prediction)."
    )
    eta_in_band_at_enqueue = models.BooleanField(null=True, blank=True, editable=False)
    eta_error_at_start = models.FloatField(null=True, blank=True, editable=False)
    eta_in_band_at_start = models.BooleanField(null=True, blank=True, editable=False)

    objects = ChartManager()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["org", "external_id"], name="chart_org_external_id_unique"),
            models.CheckConstraint(condition=Q(state__in=ChartState.values), name="chart_state_valid"),
            models.CheckConstraint(condition=Q(cost__isnull=True) | Q(cost__gte=1), name="chart_cost_gte_1"),
        ]
        indexes = [
            models.Index(
                fields=["org", "state"],
                name="chart_active_org_state_idx",
                condition=Q(state__in=[s.value for s in ACTIVE_STATES]),
            ),
            # The replan reads the charts submitted in the last arrival windows (`snapshot.recent_history`);
            # the charts list filters by `created_after` and `created_before`.
            models.Index(fields=["created_at"], name="chart_created_at_idx"),
            # The charts list's `updated_after` (every transition and lever sets `updated_at`).
            models.Index(fields=["updated_at"], name="chart_updated_at_idx"),
            # The charts past their due time that have not finished (`late`), and the turnaround metrics.
            models.Index(fields=["due_at"], name="chart_due_at_idx", condition=Q(due_at__isnull=False)),
            # The dashboard's ETA accuracy reads the last hour's finished charts (`scheduling.accuracy`);
            # a chart enters it at its finish only (no cost to a submission).
            models.Index(fields=["finished_at"], name="chart_finished_at_idx", condition=Q(finished_at__isnull=False)),
            # Reconcile finds the few cancelled charts whose workflow may still run (`close_cancelled`).
            models.Index(
                fields=["cancel_requested_at"],
                name="chart_cancel_requested_idx",
                condition=Q(cancel_requested_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.external_id}"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


class ChartPlan(models.Model):
    """The materialized plan of one waiting or in-flight chart, rewritten whole by each replan.

    No foreign-key constraint: the table is derived data, replaced in bulk (COPY) every few seconds,
    and a check per row would only slow that down; a chart without a plan row has no plan.

    Each replan builds a new table like this one and swaps it in under this name
    (`scheduling.replan`): its columns, defaults, checks and indexes (as the catalog has them) carry
    over, so migrations change it as any table; grants and storage parameters do not. It is unlogged
    (no WAL: a crash of the database server empties it until the next replan; see
    `scheduling.replan._build_next_plan`).
    """

    chart = models.OneToOneField(
        Chart, primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="plan"
    )
    position = models.PositiveIntegerField(null=True, blank=True, help_text="0-based place in the fair order.")
    predicted_start = models.DateTimeField(null=True, blank=True)
    eta = models.DateTimeField(null=True, blank=True)
    eta_low = models.DateTimeField(null=True, blank=True, help_text="p10 of the predicted finish.")
    eta_high = models.DateTimeField(null=True, blank=True, help_text="p90 of the predicted finish.")
    # Why the chart is not running now, from the walk at the replan (`scheduling.core.waiting`).
    waiting_reason = models.CharField(
        max_length=20, blank=True, help_text="Why it waits (`WaitingReason`); empty when it is not waiting."
    )
    waiting_until = models.DateTimeField(
        null=True, blank=True, help_text="When that reason lifts as far as the plan knows (`WaitingReason`)."
    )
    head_of_line = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="The chart heading the line that this one, which would fit, waits behind.",
    )
    # What the plan expects an in-flight chart's run to last (seconds; null for a waiting chart): a
    # run past it is overdue, "running longer than usual" (`charts.overdue`).
    expected_duration = models.FloatField(
        null=True, blank=True, help_text="An in-flight chart's expected run time in seconds (null: waiting)."
    )
    # The chance, from the distribution its band comes from, that it finishes after its due time.
    late_chance = models.FloatField(
        null=True, blank=True, help_text="Chance of finishing after its due time, 0 to 1 (null: no due time or no ETA)."
    )

    class Meta:
        indexes = [models.Index(fields=["position"], name="chart_plan_position_idx")]

    def __str__(self) -> str:
        return f"{self.chart_id} at {self.position}"


class ChartPromise(models.Model):
    """The ETA and p10-p90 band a chart was given by its first plan after its submission (its
    promise at enqueue), and when that plan was made; written once per chart by the replan
    (`scheduling.replan._record_first_plans`), read at the chart's success (`scheduling.accuracy`).

    A table of its own, not columns of the chart: the replan inserts the new charts' rows in bulk
    into this narrow table, where an update of as many chart rows (and of their many indexes) made
    the first replan after a large bulk submission many times slower (`bench/bench_replan.py`). No
    foreign-key constraint, as for the plan: a check per inserted row for derived data.
    """

    chart = models.OneToOneField(
        Chart, primary_key=True, on_delete=models.CASCADE, db_constraint=False, related_name="promise"
    )
    planned_at = models.DateTimeField(help_text="When the plan that gave it was made.")
    eta = models.DateTimeField(null=True, blank=True, help_text="Null: that plan gave it no ETA (held, paused).")
    eta_low = models.DateTimeField(null=True, blank=True)
    eta_high = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.chart_id} promised {self.eta}"


class ChartEvent(models.Model):
    """One transition of a chart, written in the same transaction as the transition itself."""

    # Indexed by chart_event_chart_at_idx (chart, at), whose leading column serves every lookup by chart.
    chart = models.ForeignKey(Chart, on_delete=models.CASCADE, related_name="events", db_index=False)
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    actor = models.CharField(max_length=200)
    reason = models.CharField(max_length=1000, blank=True)
    at = models.DateTimeField(default=timezone.now)
    # The writing transaction, for the change feed's commit-ordered cursor (`common.txid`).
    txid = models.BigIntegerField(db_default=CurrentTransactionId(), editable=False)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["chart", "at"], name="chart_event_chart_at_idx"),
            models.Index(fields=["-at"], name="chart_event_at_idx"),
            models.Index(fields=["txid", "id"], name="chart_event_txid_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.chart_id}: {self.from_state or '-'} -> {self.to_state} by {self.actor}"


class DurationStat(models.Model):
    """What the ETAs learned of one (org, workflow)'s finished runs, the state of the pure rule
    `scheduling.core.durations.duration_learn` (`duration_record` in scheduling.reconcile applies it):
    the fading means kept as `count` runs' worth of sums (so that pairs pool by adding them), and the
    streak of the latest runs outside the pair's usual band with their raw sums, the starts the
    rule tells the order of finishes from a change by, and how many runs it has learned."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="duration_stats")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="duration_stats")
    count = models.PositiveIntegerField(default=0)
    total_seconds = models.FloatField(default=0.0)
    sum_log = models.FloatField(default=0.0)
    sum_log_sq = models.FloatField(default=0.0)
    streak = models.IntegerField(default=0)
    streak_seconds = models.FloatField(default=0.0)
    streak_sum_log = models.FloatField(default=0.0)
    settled_started_at = models.DateTimeField(null=True, blank=True)
    streak_started_at = models.DateTimeField(null=True, blank=True)
    # Runs learned since the state began or restarted (`count` stops at the memory; a row older than
    # this field reads as many as its count).
    learned = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "workflow"], name="duration_stat_org_workflow_unique")]
        verbose_name = "learned duration"

    def __str__(self) -> str:
        return f"{self.org} {self.workflow}: {self.count} runs"

    @property
    def mean(self) -> float | None:
        return self.total_seconds / self.count if self.count else None

    @property
    def log_sigma(self) -> float | None:
        """Standard deviation of log(duration): the spread that the ETA bands use."""
        return log_spread(count=self.count, sum_log=self.sum_log, sum_log_sq=self.sum_log_sq)


def log_spread(*, count: float, sum_log: float, sum_log_sq: float) -> float | None:
    """Standard deviation of log(duration) from the sums of `count` runs (one pair's or several pooled);
    None under two runs."""
    if count < 2:
        return None
    mean_log = sum_log / count
    return math.sqrt(max(0.0, sum_log_sq / count - mean_log * mean_log))
