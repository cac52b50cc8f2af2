"""The Temporal client of the synchronous shell: dispatcher, reconciler, commands and views.

Settings (read at call time, so tests can point them elsewhere): those of
`scheduling.temporal.connection` (address, namespace, TLS, API key, connect timeout).

Process and thread model, the reason this module exists:

1. Nothing connects at import. The first call in a process connects; later calls reuse the client.
2. Each process gets its own `_ProcessBridge`: a temporalio `Runtime` made in that process, an asyncio
   event loop running forever in a daemon thread, and the clients connected on that loop, one per
   `TemporalSettings` (address, namespace, TLS, key). Sync callers submit coroutines to the loop
   with `temporal_call` and block on the result; any number of threads may do so at once, their
   calls interleave on the one loop.
3. Clients and runtimes do not survive a fork (Celery's prefork pool forks its children after the
   parent may have used a client): the child inherits neither the loop thread nor the Rust runtime's
   threads. The bridge is therefore keyed by `os.getpid()`: a process whose pid differs from its
   bridge's builds a new one and connects afresh. The inherited bridge is parked in
   `_INHERITED_BRIDGES` and never touched again, not even by the garbage collector, because dropping
   Rust objects made by another process can crash (temporalio sdk-python issue 11).
4. A short-lived process that used a client can abort at interpreter exit (sdk-python issue 300), so
   management commands that call this module flush their output and leave with `os._exit`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode

from scheduling.temporal.activities import THROTTLE_ERROR_TYPE
from scheduling.temporal.connection import TemporalSettings, connect_client

T = TypeVar("T")

logger = logging.getLogger(__name__)

CALL_TIMEOUT_SECONDS = 30.0

STATUS_NAMES: dict[WorkflowExecutionStatus, str] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.COMPLETED: "completed",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "canceled",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued_as_new",
}
UNSUCCESSFUL_STATUSES = frozenset(
    {
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


@dataclass(frozen=True)
class WorkflowOutcome:
    """What Temporal says about the latest run of one workflow id.

    `status` is one of the values of `STATUS_NAMES`. For a run that did not succeed,
    `failure_message` says why; `throttled` is set when it failed with a `ProviderThrottled`
    ApplicationError, with `retry_after_seconds` and `provider` from its details
    (`{"retry_after": s, "provider": p}`) where it gave them.
    """

    status: str
    run_id: str
    start_time: datetime
    close_time: datetime | None
    failure_message: str | None = None
    throttled: bool = False
    retry_after_seconds: float | None = None
    provider: str | None = None


@dataclass
class _ProcessBridge:
    """One process's Temporal runtime, event loop thread and connected clients."""

    pid: int
    runtime: Runtime
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    clients: dict[TemporalSettings, Client] = field(default_factory=dict)
    connect_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    def start(cls) -> _ProcessBridge:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="temporal-client-loop", daemon=True)
        thread.start()
        return cls(
            pid=os.getpid(),
            runtime=Runtime(telemetry=TelemetryConfig()),
            loop=loop,
            thread=thread,
        )

    async def client(self, config: TemporalSettings, *, timeout: float) -> Client:
        """The client for `config`, connecting once (retrying for up to `timeout` seconds); runs on
        this bridge's loop."""
        async with self.connect_lock:
            if config not in self.clients:
                self.clients[config] = await connect_client(config, runtime=self.runtime, timeout=timeout)
            return self.clients[config]


_BRIDGE: _ProcessBridge | None = None
_BRIDGE_LOCK = threading.Lock()
_INHERITED_BRIDGES: list[_ProcessBridge] = []


def _fresh_lock_in_child() -> None:
    """Replace the bridge lock after a fork: another thread may have held it at fork time."""
    global _BRIDGE_LOCK
    _BRIDGE_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


def _bridge() -> _ProcessBridge:
    """This process's bridge, built on first use and again in a forked child."""
    global _BRIDGE
    with _BRIDGE_LOCK:
        if _BRIDGE is None or _BRIDGE.pid != os.getpid():
            if _BRIDGE is not None:
                _INHERITED_BRIDGES.append(_BRIDGE)
            _BRIDGE = _ProcessBridge.start()
        return _BRIDGE


def temporal_call(call: Callable[[Client], Awaitable[T]], *, timeout: float = CALL_TIMEOUT_SECONDS) -> T:
    """Run `call(client)` on this process's Temporal loop and return its result.

    `call` gets the client for the current settings and returns an awaitable. The calling thread
    blocks for at most `timeout` seconds; on timeout the coroutine is cancelled and `TimeoutError`
    raised. Exceptions of the call are re-raised here. Must not be called from the bridge's own loop.
    """
    bridge = _bridge()
    config = TemporalSettings.from_django()

    async def run() -> T:
        return await call(await bridge.client(config, timeout=min(timeout, config.connect_timeout)))

    future = asyncio.run_coroutine_threadsafe(run(), bridge.loop)
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise


def reset_client() -> None:
    """Forget this process's connected clients; the next call connects again.

    For tests that move `TEMPORAL_ADDRESS` to another server; clients are already keyed by their
    settings, so production code never needs this.
    """
    with _BRIDGE_LOCK:
        if _BRIDGE is not None and _BRIDGE.pid == os.getpid():
            _BRIDGE.loop.call_soon_threadsafe(_BRIDGE.clients.clear)


def check_health(*, timeout: float) -> bool:
    """Whether Temporal's frontend reports itself serving, within `timeout` seconds (connecting
    first if need be). Any failure is False: readiness probes ask this."""

    async def check(client: Client) -> bool:
        return await client.service_client.check_health(timeout=timedelta(seconds=timeout))

    try:
        return temporal_call(check, timeout=timeout)
    except Exception as err:
        logger.warning("Temporal health check failed: %r", err)
        return False


def start_chart_workflow(
    *,
    workflow_type: str,
    task_queue: str,
    workflow_id: str,
    payload: dict[str, Any],
    execution_timeout: timedelta | None = None,
) -> str:
    """Start a workflow with the caller's deterministic id and return its run id.

    `execution_timeout` is the run timeout: Temporal closes the workflow as timed out when it has
    not finished by then, whether or not any worker ever picked it up.

    A repeated start of the same id never runs it twice:
    - `id_conflict_policy=USE_EXISTING`: if a run with this id is still running, the server starts
      nothing and answers with that run, whose id is returned.
    - `id_reuse_policy=REJECT_DUPLICATE`: if a run with this id has closed (in any state), the
      server refuses with `WorkflowAlreadyStartedError`; the existing run id is returned.
    The guarantee lasts as long as the server keeps the closed run (the namespace's retention
    period); fairsched changes the id for every attempt, so it never needs to reuse one.
    """

    async def start(client: Client) -> str:
        try:
            handle = await client.start_workflow(
                workflow_type,
                payload,
                id=workflow_id,
                task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                execution_timeout=execution_timeout,
            )
        except WorkflowAlreadyStartedError as err:
            if err.run_id:
                return err.run_id
            description = await client.get_workflow_handle(workflow_id).describe()
            return description.run_id
        if handle.result_run_id is None:
            raise RuntimeError(f"Temporal started {workflow_id} without a run id")
        return handle.result_run_id

    return temporal_call(start)


def describe_workflow(workflow_id: str) -> WorkflowOutcome | None:
    """Describe the latest run of `workflow_id`, or None if Temporal has no such workflow.

    Describe reads the workflow's own record, which is current (unlike list, see
    `list_open_workflow_ids`). For a run that did not succeed, the failure is read from its closing
    history event (`_unsuccessful_failure`).
    """

    async def describe(client: Client) -> WorkflowOutcome | None:
        try:
            description = await client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        status = description.status
        if status is None:
            raise RuntimeError(f"Temporal described {workflow_id} without a status")
        outcome = WorkflowOutcome(
            status=STATUS_NAMES[status],
            run_id=description.run_id,
            start_time=description.start_time,
            close_time=description.close_time,
        )
        if status not in UNSUCCESSFUL_STATUSES:
            return outcome
        return await _unsuccessful_failure(client, workflow_id, outcome)

    return temporal_call(describe)


async def _unsuccessful_failure(client: Client, workflow_id: str, outcome: WorkflowOutcome) -> WorkflowOutcome:
    """Add the failure message and any throttle of a closed, unsuccessful run to `outcome`.

    Steps:
    1. Ask for the run's result, pinned to that run (`follow_runs=False`): the SDK reads the closing
       event and raises `WorkflowFailureError` whose cause is the decoded failure (an
       ApplicationError, or a cancel, terminate or timeout error).
    2. The message is the cause's, with its type when it has one.
    3. Walk the cause chain for the first `ProviderThrottled` ApplicationError: the run was
       throttled; take its `retry_after` and `provider` details where given.
    """
    handle = client.get_workflow_handle(workflow_id, run_id=outcome.run_id)
    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        failure: BaseException = err.cause or err
    else:
        return outcome
    message = str(failure)
    throttled = False
    retry_after: float | None = None
    provider: str | None = None
    link: BaseException | None = failure
    while link is not None:
        if isinstance(link, ApplicationError) and link.type == THROTTLE_ERROR_TYPE:
            throttled = True
            details = link.details[0] if link.details else {}
            if isinstance(details, dict):
                if details.get("retry_after") is not None:
                    retry_after = float(details["retry_after"])
                if details.get("provider") is not None:
                    provider = str(details["provider"])
            break
        link = link.__cause__
    return WorkflowOutcome(
        status=outcome.status,
        run_id=outcome.run_id,
        start_time=outcome.start_time,
        close_time=outcome.close_time,
        failure_message=message,
        throttled=throttled,
        retry_after_seconds=retry_after,
        provider=provider,
    )


def list_open_workflow_ids(prefix: str = "chart-") -> set[str]:
    """Ids of the running workflows whose id starts with `prefix`, from Temporal's visibility store.

    Visibility is eventually consistent: a workflow that just started may be missing and one that
    just closed may still be listed. Callers use this to find candidates and act only on what
    `describe_workflow` says about each.
    """
    if '"' in prefix or "\\" in prefix:
        raise ValueError(f"workflow id prefix {prefix!r} may not contain quotes or backslashes")
    query = 'ExecutionStatus = "Running"'
    if prefix:
        query += f' AND WorkflowId STARTS_WITH "{prefix}"'

    async def list_ids(client: Client) -> set[str]:
        return {execution.id async for execution in client.list_workflows(query)}

    return temporal_call(list_ids)


def cancel_workflow(workflow_id: str) -> None:
    """Request cancellation of the workflow's running run; a missing or closed one is ignored."""

    async def cancel(client: Client) -> None:
        try:
            await client.get_workflow_handle(workflow_id).cancel()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise

    temporal_call(cancel)


def terminate_workflow(workflow_id: str, *, reason: str) -> None:
    """Terminate the workflow's running run with `reason`; a missing or closed one is ignored."""

    async def terminate(client: Client) -> None:
        try:
            await client.get_workflow_handle(workflow_id).terminate(reason=reason)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise

    temporal_call(terminate)
