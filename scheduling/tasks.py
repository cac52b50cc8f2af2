"""Celery tasks: thin wrappers that run the scheduler's passes.

Beat fires `tick` every second; `tick` runs replan and reconcile when their intervals (read from the
live configuration, so operators can change them without a restart) have passed. A change of a lever
asks for a replan at once (`common.events.replan_soon`, which sends `replan` by name); bursts of changes
are coalesced by a short-lived Redis flag.
`tick` also sends the retention pass (`scheduling.retention`) once a minute while a retention is set.
Every replan is followed by a dispatch. A reconcile that finished a run dispatches first, into the
freed budget and against the order already persisted (dispatch is dumb: it walks that order), and
replans after: the next chart starts without waiting for a replan.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from charts.services import CANCEL_WORKFLOW_TASK
from common import tracing
from common.events import REPLAN_PENDING_KEY, REPLAN_TASK, replan_soon
from knobs.models import SchedulerConfig
from scheduling.dispatch import dispatch_run
from scheduling.reconcile import reconcile_chart as reconcile_one
from scheduling.reconcile import reconcile_run
from scheduling.replan import plan_refresh
from scheduling.retention import RUN_INTERVAL as RETENTION_INTERVAL
from scheduling.retention import retention_run
from scheduling.temporal.client import cancel_workflow as temporal_cancel_workflow

logger = logging.getLogger(__name__)

LAST_RUN_KEY = "fairsched:last-run:{}"
# A hint arrives just before its workflow closes; look again every 50 ms, for 3 s at most.
HINT_RETRIES = 60
HINT_RETRY_SECONDS = 0.05
TICK_SECONDS = 1.0  # beat's schedule for `tick` (fairsched/celery.py)


@shared_task(name=REPLAN_TASK, ignore_result=True)
def replan() -> None:
    """Replan, then dispatch against the new order."""
    cache.delete(REPLAN_PENDING_KEY)
    with tracing.span("replan"):
        plan_refresh()
    dispatch_run()


@shared_task(name="scheduling.tasks.dispatch", ignore_result=True)
def dispatch() -> None:
    dispatch_run()


@shared_task(name="scheduling.tasks.reconcile", ignore_result=True)
def reconcile() -> None:
    """Reconcile with Temporal; a finished run frees budget: dispatch into it, then replan."""
    result = reconcile_run()
    if result.finished or result.marked_running:
        dispatch_run()
        replan()


@shared_task(name=CANCEL_WORKFLOW_TASK, ignore_result=True)
def cancel_workflow(workflow_id: str) -> None:
    """Ask Temporal to cancel a cancelled chart's workflow (`charts.services.chart_cancel` sends this
    after commit); if Temporal cannot be reached, the reconcile pass keeps asking."""
    temporal_cancel_workflow(workflow_id)


@shared_task(name="scheduling.tasks.reconcile_chart", bind=True, ignore_result=True, max_retries=HINT_RETRIES)
def reconcile_chart(self: object, chart_id: int) -> None:
    """A workflow's completion hint: settle its chart now (it may still be closing; look again soon).

    1. Settle the chart from what Temporal says; a workflow still closing is looked at again soon.
    2. Dispatch into the budget it freed, walking the order already persisted.
    3. Ask for a replan (its own task, which dispatches again against the new order).
    """
    if reconcile_one(chart_id):
        raise self.retry(countdown=HINT_RETRY_SECONDS)  # type: ignore[attr-defined]
    dispatch_run()
    replan_soon()


@shared_task(name="scheduling.tasks.tick", ignore_result=True)
def tick() -> None:
    """Run each periodic pass whose interval has passed since it last ran (in any worker)."""
    config = SchedulerConfig.load()
    if _due("reconcile", config.reconcile_interval):
        reconcile.delay()
    if _due("replan", config.replan_interval):
        replan_soon()
    if settings.FAIRSCHED_RETENTION_DAYS and _due("retention", RETENTION_INTERVAL):
        retention.delay()


@shared_task(name="scheduling.tasks.retention", ignore_result=True)
def retention() -> None:
    """Delete (export first, if set) finished charts past the retention, a bounded share per run."""
    retention_run()


def _due(name: str, interval: float) -> bool:
    """Claim the pass's slot for this interval: the key lives `interval` seconds and `add` is atomic,
    so only the first caller in an interval (in any worker) gets True. Beat ticks once a second, so an
    interval of a second or less is due at every tick (the cache keeps whole seconds)."""
    if interval <= TICK_SECONDS:
        return True
    return bool(cache.add(LAST_RUN_KEY.format(name), 1, timeout=int(interval)))
