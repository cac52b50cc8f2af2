"""A minimal Temporal worker for fairsched: one workflow, plain temporalio, nothing from fairsched.

    python examples/worker.py --address 127.0.0.1:7233 --task-queue render

Register it in fairsched as a workflow of type `example.render` on that task queue.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

WORKFLOW_TYPE = "example.render"
THROTTLED = "ProviderThrottled"  # the error type fairsched reads as "the provider said: not now"
HEARTBEAT_SECONDS = 5.0


class ProviderBusy(Exception):
    """The provider answered 429 Too Many Requests, with its Retry-After in seconds (or none)."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__(f"provider busy, retry after {retry_after} s")
        self.retry_after = retry_after


async def call_provider(params: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Stand-in for the real work: sleeps `seconds`; `throttle` plays a 429 with that Retry-After."""
    if "throttle" in payload:
        raise ProviderBusy(retry_after=payload["throttle"])
    await asyncio.sleep(float(payload.get("seconds", params.get("seconds", 1.0))))
    return {"rendered": payload.get("file", "")}


async def heartbeat_while_running() -> None:
    """Tell Temporal every few seconds that this worker is alive: a killed worker's run then goes to
    another worker within the heartbeat timeout, not after the activity's hour."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_SECONDS)


@activity.defn
async def render(chart: dict[str, Any]) -> dict[str, Any]:
    heartbeat = asyncio.create_task(heartbeat_while_running())
    try:
        return await call_provider(chart["params"], chart["payload"])
    except ProviderBusy as busy:
        # Not a failure: fairsched requeues the chart without spending an attempt and pauses the
        # provider for this org until Retry-After. Add "provider": "<slug>" to name another provider
        # than the workflow's.
        raise ApplicationError(
            str(busy), {"retry_after": busy.retry_after}, type=THROTTLED, non_retryable=True
        ) from busy
    except Exception as err:
        # Its own failures are fairsched's to retry (with backoff, within the org's share), so they
        # are non-retryable here; a cancellation (its worker stopping) is not caught, and retried.
        raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
    finally:
        heartbeat.cancel()


@workflow.defn(name=WORKFLOW_TYPE)
class RenderWorkflow:
    @workflow.run
    async def run(self, chart: dict[str, Any]) -> dict[str, Any]:
        """`chart`: chart_id, org, external_id, attempt, params (the workflow's), payload (the chart's)."""
        try:
            return await workflow.execute_activity(
                render,
                chart,
                start_to_close_timeout=timedelta(hours=1),
                heartbeat_timeout=timedelta(seconds=3 * HEARTBEAT_SECONDS),
                # Temporal retries only a lost worker (the activity's own failures are non-retryable),
                # so that a restart of the workers costs the chart no attempt; five losses end the run.
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=5),
            )
        except ActivityError as err:
            cause = err.cause  # fail with the activity's own error: fairsched reads its type and message
            if isinstance(cause, ApplicationError):
                raise ApplicationError(cause.message, *cause.details, type=cause.type, non_retryable=True) from err
            raise


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--task-queue", default="render")
    args = parser.parse_args()
    client = await Client.connect(args.address, namespace=args.namespace)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with Worker(client, task_queue=args.task_queue, workflows=[RenderWorkflow], activities=[render]):
        print(f"polling {args.task_queue}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
    # Leave without finalizing: a process that used a Temporal client can abort while the
    # interpreter shuts down (temporalio sdk-python issue 300). The worker has stopped cleanly here.
    sys.stdout.flush()
    os._exit(0)
