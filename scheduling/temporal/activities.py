"""Activities of the demo workflow.

Activities run in the worker process, outside the workflow sandbox, but this module still imports
nothing from Django or the project apps: the workflow module imports it (passed through the sandbox)
for the activity references and the input types, and the worker decides what the completion hook
does.

`DemoActivities` is a class so that the completion hook is state of one worker, registered when the
worker starts, rather than a module global that tests and processes would share.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

THROTTLE_ERROR_TYPE = "ProviderThrottled"
"""ApplicationError type of a failure that asks the scheduler to pause a provider.

Its first detail is ``{"retry_after": seconds, "provider": name}``. Any workflow, not only the demo,
can fail with this type to throttle its provider; the client reads it back in `describe_workflow`.
"""

DEMO_FAILURE_TYPE = "DemoFailure"
"""ApplicationError type of a demo run that failed by its fail probability, without throttling."""

HEARTBEAT_INTERVAL_SECONDS = 2.0
"""How often `demo_work` heartbeats; well inside the workflow's 10 s heartbeat timeout."""

CompletionHook = Callable[[int, str], None]
"""Called with (chart_id, outcome) where outcome is "completed" or "failed"."""


def no_completion_hook(chart_id: int, outcome: str) -> None:
    """The default hook: nothing to do, reconcile finds the outcome on its next pass."""


@dataclass(frozen=True)
class DemoWorkInput:
    """What one run of `demo_work` does: sleep `duration` seconds, then maybe fail."""

    chart_id: int
    attempt: int
    duration: float
    fail_probability: float
    provider: str | None = None
    throttle_retry_after: float | None = None


@dataclass(frozen=True)
class CompletionHintInput:
    """The chart whose run just ended and how it ended ("completed" or "failed")."""

    chart_id: int
    outcome: str


def run_fails(chart_id: int, attempt: int, fail_probability: float) -> bool:
    """Decide whether a demo run fails, the same way every time for one chart attempt.

    The draw is seeded with the chart id and the attempt, so a retry of the same chart draws again
    while a replayed or re-run attempt draws the same. `random()` is in [0, 1): a probability of 1
    always fails and 0 never does.
    """
    return random.Random(f"{chart_id}:{attempt}").random() < fail_probability


class DemoActivities:
    """The demo workflow's activities, bound to the completion hook of one worker."""

    def __init__(self, completion_hook: CompletionHook = no_completion_hook) -> None:
        self._completion_hook = completion_hook

    @activity.defn(name="demo_work")
    async def demo_work(self, work: DemoWorkInput) -> float:
        """Work for `work.duration` seconds, heartbeating, then succeed or fail.

        Steps:
        1. Resume from the seconds already worked, which an earlier attempt's heartbeats saved (it
           lost its worker: `WORKER_LOSS_RETRY`): a restart of the workers costs the chart the work
           since that attempt's last heartbeat, not all of it.
        2. Sleep in slices of at most `HEARTBEAT_INTERVAL_SECONDS`, heartbeating the seconds worked
           after each, so the server notices a dead worker within the heartbeat timeout and a
           cancellation reaches the sleep (async activities are cancelled with
           `asyncio.CancelledError`). A cancelled attempt (its worker stopping) heartbeats its
           progress once more on the way out: the SDK sends the last heartbeat with the failure.
        3. Draw the failure with `run_fails`. A failure is non-retryable: fairsched's own retry
           policy, not Temporal's, decides about another attempt. It is a `THROTTLE_ERROR_TYPE`
           error carrying the retry-after and provider when `throttle_retry_after` is set, a
           `DEMO_FAILURE_TYPE` one otherwise. Both are planned, so they are BENIGN: Temporal logs them
           at DEBUG instead of a warning with a traceback per failure.

        Returns the seconds this attempt worked.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        saved = activity.info().heartbeat_details
        done = float(saved[0]) if saved else 0.0
        deadline = started + max(work.duration - done, 0.0)
        try:
            while (remaining := deadline - loop.time()) > 0:
                await asyncio.sleep(min(remaining, HEARTBEAT_INTERVAL_SECONDS))
                activity.heartbeat(done + loop.time() - started)
        except asyncio.CancelledError:
            activity.heartbeat(done + loop.time() - started)
            raise
        if run_fails(work.chart_id, work.attempt, work.fail_probability):
            message = f"chart {work.chart_id} attempt {work.attempt} failed"
            if work.throttle_retry_after is not None:
                raise ApplicationError(
                    f"{message}: provider {work.provider} throttled",
                    {"retry_after": work.throttle_retry_after, "provider": work.provider},
                    type=THROTTLE_ERROR_TYPE,
                    non_retryable=True,
                    category=ApplicationErrorCategory.BENIGN,
                )
            raise ApplicationError(
                message, type=DEMO_FAILURE_TYPE, non_retryable=True, category=ApplicationErrorCategory.BENIGN
            )
        return loop.time() - started

    @activity.defn(name="completion_hint")
    async def completion_hint(self, hint: CompletionHintInput) -> None:
        """Tell the worker's hook that a chart's run ended.

        The hook is synchronous (e.g. a Celery `send_task`, which does blocking broker I/O), so it
        runs in a thread to keep the worker's event loop free.
        """
        await asyncio.to_thread(self._completion_hook, hint.chart_id, hint.outcome)
