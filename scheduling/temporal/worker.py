"""The Temporal worker for fairsched's demo workflows.

`run_worker` polls one or more task queues until its stop event is set. It connects its own client
on its own event loop (not the sync bridge of `scheduling.temporal.client`): a worker lives in an
async process of its own, the `temporal_worker` management command, or in a test's thread.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from datetime import timedelta

from celery import current_app
from django.conf import settings
from temporalio.worker import Worker

from scheduling.temporal.activities import CompletionHook, DemoActivities, no_completion_hook
from scheduling.temporal.connection import connect_client
from scheduling.temporal.workflows import ChartWorkflow

logger = logging.getLogger(__name__)

DEFAULT_TASK_QUEUE = "fairsched-demo"
DEFAULT_SHUTDOWN_SECONDS = 5.0
"""How long running activities may finish after a stop before the worker cancels them
(`TEMPORAL_WORKER_SHUTDOWN_SECONDS`).

A cancelled demo activity fails its run (no Temporal retries), which fairsched then retries, so a
worker restart costs an attempt, not a chart.
"""
RECONCILE_HINT_TASK = "scheduling.tasks.reconcile_chart"
RECONCILE_HINT_COUNTDOWN_SECONDS = 0.05


def enqueue_reconcile_hint(chart_id: int, outcome: str) -> None:
    """Completion hook of the real worker: ask Celery to reconcile the chart soon.

    The task is sent by name, so the worker does not import the tasks module. It is delayed by
    `RECONCILE_HINT_COUNTDOWN_SECONDS` because the hint activity runs just before its workflow closes;
    a reconcile that still finds the run open looks again a moment later (`reconcile_chart` retries).
    It goes through Celery's current app (the project's, `fairsched.celery`), which this scheduling module
    cannot import; nothing connects to a broker until a hint is sent, so the worker starts without one
    and tests can run the worker with another hook.
    """
    current_app.send_task(RECONCILE_HINT_TASK, args=[chart_id], countdown=RECONCILE_HINT_COUNTDOWN_SECONDS)
    logger.info("chart %s %s: reconcile hinted", chart_id, outcome)


async def run_worker(
    *,
    task_queues: list[str],
    stop_event: asyncio.Event | None = None,
    completion_hook: CompletionHook = no_completion_hook,
) -> None:
    """Run the demo workflow and its activities on `task_queues` until `stop_event` is set.

    Steps:
    1. Connect a client with the Temporal settings (`connect_client`: TLS, API key, retried with
       backoff for `TEMPORAL_CONNECT_TIMEOUT` seconds, so a worker may start before Temporal).
    2. Start one `Worker` per task queue (a Temporal worker polls one queue), all sharing one
       `DemoActivities` bound to `completion_hook`.
    3. Wait for `stop_event` (forever without one: cancel the task to stop).
    4. Shut the workers down: stop polling, let running activities finish for
       `TEMPORAL_WORKER_SHUTDOWN_SECONDS`, then cancel them.
       A worker that fails fatally cancels this coroutine and its error is raised from here.
    """
    if not task_queues:
        raise ValueError("run_worker needs at least one task queue")
    client = await connect_client()
    grace = timedelta(seconds=float(getattr(settings, "TEMPORAL_WORKER_SHUTDOWN_SECONDS", DEFAULT_SHUTDOWN_SECONDS)))
    activities = DemoActivities(completion_hook)
    stop = stop_event or asyncio.Event()
    async with AsyncExitStack() as workers:
        for queue in task_queues:
            await workers.enter_async_context(
                Worker(
                    client,
                    task_queue=queue,
                    workflows=[ChartWorkflow],
                    activities=[activities.demo_work, activities.completion_hint],
                    graceful_shutdown_timeout=grace,
                )
            )
        logger.info("temporal worker polling %s", ", ".join(task_queues))
        await stop.wait()
    logger.info("temporal worker stopped")
