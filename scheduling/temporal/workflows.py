"""Demo workflows shipped with fairsched.

This module runs inside the Temporal workflow sandbox, which re-imports it for every run and checks
it for determinism: it imports nothing from Django or the project apps, only temporalio and the
activity module (passed through the sandbox, since activities are not workflow code).

`ChartWorkflow` (type name `DEMO_WORKFLOW_TYPE`) stands in for a real chart: it works for a duration,
heartbeating, and fails with a probability, both set per workflow in the chart's params and
overridable per chart in its payload. A run that fails ends in an `ApplicationError` whose type and
details the client reads back (`THROTTLE_ERROR_TYPE` carries a retry-after and a provider).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from scheduling.temporal.activities import (
        CompletionHintInput,
        DemoActivities,
        DemoWorkInput,
    )

DEMO_WORKFLOW_TYPE = "fairsched.demo"
BAD_INPUT_ERROR_TYPE = "BadChartInput"

DEFAULT_DURATION_SECONDS = 1.0
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
WORK_TIMEOUT_MARGIN = timedelta(minutes=1)
HINT_TIMEOUT = timedelta(seconds=30)
NO_RETRY = RetryPolicy(maximum_attempts=1)
"""The completion hint is tried once: reconcile finds the outcome without it."""
WORKER_LOSS_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=5)
"""The work is tried again only when its worker was lost: stopped mid-run (a deploy: the worker
cancels it after its grace) or silent past the heartbeat timeout (killed). Its own failures are
non-retryable, fairsched's to retry (backoff, budget, caps), so a worker's restart costs the chart
no attempt. A retry waits in the task queue until a worker takes it, however long the outage, so
the five attempts count losses, not minutes: a run survives four, and a chart that kills its
worker every time (out of memory, say) fails after five instead of taking down worker after worker
until its run timeout."""


def work_input(chart: dict[str, Any]) -> DemoWorkInput:
    """Read the workflow argument into the demo work, the chart's payload overriding its params.

    Bad input fails the workflow with a non-retryable `BAD_INPUT_ERROR_TYPE` error; any other
    exception would fail only the workflow task, which Temporal retries forever.
    """
    try:
        effective = {**(chart.get("params") or {}), **(chart.get("payload") or {})}
        throttle = effective.get("throttle_retry_after")
        provider = effective.get("provider")
        return DemoWorkInput(
            chart_id=int(chart["chart_id"]),
            attempt=int(chart.get("attempt", 1)),
            duration=float(effective.get("duration", DEFAULT_DURATION_SECONDS)),
            fail_probability=float(effective.get("fail_probability", 0.0)),
            provider=None if provider is None else str(provider),
            throttle_retry_after=None if throttle is None else float(throttle),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ApplicationError(f"bad chart input: {err!r}", type=BAD_INPUT_ERROR_TYPE, non_retryable=True) from err


@workflow.defn(name=DEMO_WORKFLOW_TYPE)
class ChartWorkflow:
    """One attempt of one chart, on the demo activity."""

    @workflow.run
    async def run(self, chart: dict[str, Any]) -> dict[str, Any]:
        """Run the chart's work, then hint its outcome.

        Steps:
        1. Read the effective settings (`work_input`).
        2. Run `demo_work` with a heartbeat timeout, so that a lost worker is noticed within seconds
           instead of after the whole duration, and the work goes to the next worker of the queue
           (`WORKER_LOSS_RETRY`); its own failure ends the run.
        3. Run `completion_hint` with the outcome. The hint only lets fairsched reconcile early; a
           hint that fails is logged and changes nothing.
        4. Succeed with a summary, or fail with the activity's error re-raised as this workflow's
           `ApplicationError` (same message, type and details), so a describe finds them on the
           top-level failure.

        A cancellation of the workflow cancels the activity, whose cancellation error is re-raised
        so the run ends as canceled rather than failed; there is no hint then, reconcile records it
        on its next pass.
        """
        work = work_input(chart)
        try:
            worked = await workflow.execute_activity_method(
                DemoActivities.demo_work,
                work,
                start_to_close_timeout=timedelta(seconds=work.duration) + WORK_TIMEOUT_MARGIN,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=WORKER_LOSS_RETRY,
            )
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            await self._hint(work.chart_id, "failed")
            cause = err.cause
            if isinstance(cause, ApplicationError):
                raise ApplicationError(cause.message, *cause.details, type=cause.type, non_retryable=True) from err
            raise ApplicationError(
                f"chart {work.chart_id} attempt {work.attempt}: {cause or err}", non_retryable=True
            ) from err
        await self._hint(work.chart_id, "completed")
        return {
            "chart_id": work.chart_id,
            "org": chart.get("org"),
            "external_id": chart.get("external_id"),
            "attempt": work.attempt,
            "worked_seconds": worked,
        }

    async def _hint(self, chart_id: int, outcome: str) -> None:
        try:
            await workflow.execute_activity_method(
                DemoActivities.completion_hint,
                CompletionHintInput(chart_id=chart_id, outcome=outcome),
                start_to_close_timeout=HINT_TIMEOUT,
                retry_policy=NO_RETRY,
            )
        except ActivityError as err:
            workflow.logger.warning("completion hint for chart %s failed: %s", chart_id, err)
