"""The dispatch pass: start what the budget allows, in the persisted fair order, exactly once.

Only one dispatcher acts at a time: a PostgreSQL session advisory lock, taken without waiting (a second
dispatcher skips; the one that holds the lock will see whatever made the second one run, because it
re-reads the queue after taking it). The lock lives as long as the database connection, so a
dispatcher that dies releases it with its connection.

Starting a chart has two phases, so that a crash can never run a chart twice:
1. claim it (`queued`/`retry_wait` -> `dispatching`, compare-and-swap) and commit;
2. start its Temporal workflow under a deterministic id (one per chart run: Temporal refuses a
   second run of one id), with its workflow's run timeout as Temporal's execution timeout, then
   mark it `running` with the run id.
A crash between the phases leaves a `dispatching` chart that the reconciler repairs by describing the
workflow: started (mark it running) or never started (back to `queued` at its old place).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from charts.models import CLAIMABLE_STATES, Chart, ChartState, is_retry
from charts.states import transition_if
from common import tracing
from common.actors import DISPATCHER
from common.events import changed, pass_done
from orgs.models import Org
from scheduling import metrics
from scheduling.accuracy import start_promise
from scheduling.core.dispatcher import BUDGET, START, Dispatcher
from scheduling.core.service import start_service
from scheduling.reasons import skip_reason
from scheduling.snapshot import load_dispatch_view, to_seconds
from scheduling.temporal.client import start_chart_workflow

logger = logging.getLogger(__name__)

DISPATCH_LOCK = 0x66616972  # "fair": the advisory lock key of the one dispatcher
PAGE_SIZE = 256


@dataclass(frozen=True)
class DispatchResult:
    locked: bool = True
    started: list[int] = field(default_factory=list)
    failed_to_start: list[int] = field(default_factory=list)
    # The charts the walk passed over, by (org id, reason): the metrics count them per org.
    org_skips: dict[tuple[int, str], int] = field(default_factory=dict)

    @property
    def skips(self) -> dict[str, int]:
        """The charts the walk passed over, by reason."""
        by_reason: Counter[str] = Counter()
        for (_, reason), count in self.org_skips.items():
            by_reason[reason] += count
        return dict(by_reason)


@dataclass(frozen=True)
class Choice:
    """A chart the walk starts: the cost its run will hold, and the service its start gives its org
    (`scheduling.core.service.start_service`; 0 in the high tier)."""

    chart: Chart
    cost: int
    service: float


@dataclass(frozen=True)
class Walk:
    """What one dispatch walk decided: the charts to start, in order, and the charts it passed over,
    counted by (org id, reason)."""

    chosen: list[Choice]
    skips: Counter[tuple[int, str]]


@contextmanager
def advisory_lock(key: int) -> Iterator[bool]:
    """Hold a session-level advisory lock for the block if it is free; yield whether we got it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def workflow_id_for(chart: Chart | int, run: int, created_at: float) -> str:
    """One id per chart run (`Chart.runs`, which a throttled run also counts, unlike `attempt`); the
    creation time keeps ids apart across databases on one Temporal."""
    chart_id = chart if isinstance(chart, int) else chart.pk
    return f"chart-{chart_id}-{int(created_at * 1_000_000)}-r{run}"


def dispatch_run() -> DispatchResult:
    """Start every chart the budget allows now. Steps:

    1. Take the dispatcher lock, or return at once if another dispatcher holds it.
    2. Read the orgs, costs, provider pauses and what is in flight (dispatching and running) from the
       snapshot's dispatch view (`snapshot.load_dispatch_view`), and count what is in flight: budget
       units, per-org slots, retry units.
    3. Walk the waiting charts in their persisted fair order, a page at a time, through the core's
       dispatch rule (`Dispatcher.decide`): skip charts in backoff or behind a paused provider, skip
       capped orgs and retries past the retry budget, stop at the first chart the free budget cannot
       hold (head of line). Held orgs and paused charts have no position and are never visited.
    4. Claim each chosen chart by compare-and-swap and commit (phase 1).
    5. Start each claimed chart's workflow and mark it running (phase 2).
    """
    begun = time.perf_counter()
    with tracing.span("dispatch") as pass_span, advisory_lock(DISPATCH_LOCK) as locked:
        if not locked:
            return DispatchResult(locked=False)
        walk = _choose()
        claimed = [choice for choice in walk.chosen if _claim(choice)]
        started = {choice.chart.pk: _start(choice) for choice in claimed}
        if pass_span is not None:
            pass_span.set_attribute("fairsched.chart_ids", list(started))
    result = DispatchResult(
        started=[chart_id for chart_id, ok in started.items() if ok],
        failed_to_start=[chart_id for chart_id, ok in started.items() if not ok],
        org_skips=dict(walk.skips),
    )
    slug_of = dict(Org.objects.filter(pk__in={org for org, _ in result.org_skips}).values_list("pk", "slug"))
    skips = {(slug_of.get(org, str(org)), reason): count for (org, reason), count in result.org_skips.items()}
    metrics.observe_dispatch(latency=time.perf_counter() - begun, started=len(result.started), skips=skips)
    if result.started:
        changed(kind="dispatch", replan=False, started=len(result.started))
        pass_done(kind="dispatch")
    return result


def _choose() -> Walk:
    """The charts to start now, each with the cost it will hold and the service its start gives its
    org, and the charts passed over, by reason. Steps:

    1. Read the dispatch view, and count what is in flight in the core's `Dispatcher`.
    2. Read the waiting charts a page at a time in their persisted order; the view maps each page to
       what the walk reads (`DispatchView.candidates`), and the page's columns join the dispatcher's
       (it reads its columns as they are at each decision).
    3. Decide each chart in order: a START becomes a `Choice`; a skip is counted under its reason
       (a provider's pause named apart from the chart's own backoff); a BUDGET (the head of the line) ends the walk.
    """
    view = load_dispatch_view()
    config = view.config
    budget = config.budget
    code = {org.id: index for index, org in enumerate(view.orgs)}
    weight_of = {org.id: org.weight for org in view.orgs}
    units: list[int] = []
    org_of: list[int] = []
    available_at: list[float | None] = []
    retry: list[bool] = []
    dispatcher = Dispatcher(
        budget=budget,
        caps=[org.max_concurrency for org in view.orgs],
        org=org_of,
        units=units,
        available_at=available_at,
        retry=retry,
        retry_budget=view.retry_budget,
    )
    for run in view.in_flight:
        dispatcher.occupy(code[run.org_id], min(run.cost, budget), run.retry)

    chosen: list[Choice] = []
    skips: Counter[tuple[int, str]] = Counter()
    last_position = -1
    while dispatcher.free_budget > 0:
        page = list(
            Chart.objects.filter(state__in=CLAIMABLE_STATES, plan__position__gt=last_position)
            .exclude(org_id__in=view.held)
            .order_by("plan__position")
            .only(
                "id", "org_id", "workflow_id", "available_at", "attempt", "runs", "created_at", "state", "high_priority"
            )[:PAGE_SIZE]
        )
        if not page:
            break
        last_position = page[-1].position  # type: ignore[attr-defined]  # joined in by ChartManager
        candidates = view.candidates(page)
        first = len(units)
        units.extend(min(candidate.cost, budget) for candidate in candidates)
        org_of.extend(code[chart.org_id] for chart in page)
        available_at.extend(candidate.available_at for candidate in candidates)
        retry.extend(candidate.retry for candidate in candidates)
        for index, (chart, candidate) in enumerate(zip(page, candidates, strict=True), start=first):
            verdict = dispatcher.decide(index, view.instant)
            if verdict is START:
                cost = candidate.cost
                weight = weight_of[chart.org_id]
                service = (
                    0.0
                    if chart.high_priority
                    else start_service(weight=weight, cost=cost, policy=config.policy, quantum=config.quantum)
                )
                chosen.append(Choice(chart, cost, service))
                continue
            reason = skip_reason(verdict, provider_paused=candidate.provider_paused)
            skips[(chart.org_id, reason)] += 1
            if verdict is BUDGET:
                return Walk(chosen, skips)
    return Walk(chosen, skips)


def _claim(choice: Choice) -> bool:
    """Phase 1: queued or retry_wait -> dispatching, only if nobody moved the chart meanwhile; in the
    same transaction, the org's virtual time advances by the chart's `service` (0 in the high tier),
    which the claim records so that an undone claim gives back exactly that (`reconcile._requeue`).

    The org's row is written before the chart's: the claim also writes the chart's row of the plan
    table (`charts.states._leave_plan`), and a replan writes every org's row and then takes the plan
    table's exclusive lock for its swap. Taken plan first, org second, each waited for the other
    (`deadlock detected`, seen on `make run`); in the replan's order, the claim waits for the replan's
    commit, or the replan's swap for the claim's. A claim that loses rolls its org's write back."""
    chart = choice.chart
    attempt = chart.attempt + 1
    workflow_id = workflow_id_for(chart, chart.runs + 1, to_seconds(chart.created_at))
    with transaction.atomic():
        if choice.service:
            Org.objects.filter(pk=chart.org_id).update(served=F("served") + choice.service)
        won = _claim_row(choice, attempt, workflow_id)
        if not won:
            transaction.set_rollback(True)
    if won:
        chart.attempt, chart.temporal_workflow_id = attempt, workflow_id
    return won


def _claim_row(choice: Choice, attempt: int, workflow_id: str) -> bool:
    """The claim's compare-and-swap; it also records the ETA and band that the plan this walk read
    gave the chart (joined in by the chart manager): its promise at start (`scheduling.accuracy`)."""
    chart = choice.chart
    return transition_if(
        chart.pk,
        [chart.state],
        ChartState.DISPATCHING,
        actor=DISPATCHER,
        reason=f"attempt {attempt}",
        where={"attempt": chart.attempt, "runs": chart.runs},
        attempt=F("attempt") + 1,
        runs=F("runs") + 1,
        cost=choice.cost,
        service=choice.service,
        claimed_at=timezone.now(),
        temporal_workflow_id=workflow_id,
        temporal_run_id="",
        **start_promise(chart),
    )


def _start(choice: Choice) -> bool:
    """Phase 2: start the workflow (a repeat of the same id is harmless), then mark the chart running.

    If Temporal cannot be reached the chart stays `dispatching`; the reconciler describes it later and
    either marks it running or puts it back in the queue. When tracing, the start is a span of the
    chart's submit trace (`tracing.chart_span`), which the Temporal client carries into the workflow.
    """
    chart = Chart.objects.select_related("org", "workflow").get(pk=choice.chart.pk)
    with tracing.chart_span("chart.start", chart_id=chart.pk, org_id=chart.org_id):
        payload = {
            "chart_id": chart.pk,
            "org": chart.org.slug,
            "external_id": chart.external_id,
            "attempt": chart.attempt,
            "params": chart.workflow.params,
            "payload": chart.payload,
        }
        try:
            run_id = start_chart_workflow(
                workflow_type=chart.workflow.workflow_type,
                task_queue=chart.workflow.task_queue,
                workflow_id=chart.temporal_workflow_id,
                payload=payload,
                execution_timeout=timedelta(seconds=chart.workflow.effective_run_timeout),
            )
        except Exception:
            workflow_id = chart.temporal_workflow_id
            logger.warning("could not start %s; the reconciler will settle it", workflow_id, exc_info=True)
            return False
        marked = transition_if(
            chart.pk,
            [ChartState.DISPATCHING],
            ChartState.RUNNING,
            actor=DISPATCHER,
            reason=f"workflow {chart.temporal_workflow_id}",
            where={"temporal_workflow_id": chart.temporal_workflow_id},
            temporal_run_id=run_id,
            started_at=timezone.now(),
        )
        if marked:
            metrics.observe_start(
                org=chart.org.slug,
                waited=(timezone.now() - chart.created_at).total_seconds(),
                first=not is_retry(state=ChartState.RUNNING, attempt=chart.attempt),
                cost=choice.cost,
            )
        return marked
