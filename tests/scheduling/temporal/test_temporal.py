"""The Temporal integration on a real dev server: start, describe, list, cancel, fork safety, the
demo workflow's outcomes and the worker command."""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from fairsched.devservices import REPO_ROOT, start_redis
from scheduling.temporal import client as temporal_client
from scheduling.temporal.activities import run_fails
from scheduling.temporal.client import (
    WorkflowOutcome,
    cancel_workflow,
    describe_workflow,
    list_open_workflow_ids,
    start_chart_workflow,
    temporal_call,
    terminate_workflow,
)
from scheduling.temporal.worker import RECONCILE_HINT_TASK
from scheduling.temporal.workflows import DEMO_WORKFLOW_TYPE, WORKER_LOSS_RETRY
from tests.processes import end, service, start
from tests.temporal_server import WorkerThread

T = TypeVar("T")

WAIT_SECONDS = 30.0


def eventually(probe: Callable[[], T | None], *, timeout: float = WAIT_SECONDS) -> T:
    """Poll `probe` until it returns something other than None (or False); return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout} s")
        time.sleep(0.1)


def closed_outcome(workflow_id: str) -> WorkflowOutcome:
    """Describe `workflow_id` until its run has closed."""

    def probe() -> WorkflowOutcome | None:
        outcome = describe_workflow(workflow_id)
        return outcome if outcome is not None and outcome.status != "running" else None

    return eventually(probe)


def start_demo(
    task_queue: str,
    *,
    chart_id: int,
    payload: dict[str, Any],
    params: dict[str, Any] | None = None,
    attempt: int = 1,
    prefix: str = "chart-",
) -> tuple[str, str]:
    """Start the demo workflow for a chart attempt; return (workflow id, run id)."""
    workflow_id = f"{prefix}{chart_id}-{uuid.uuid4().hex[:8]}-attempt-{attempt}"
    run_id = start_chart_workflow(
        workflow_type=DEMO_WORKFLOW_TYPE,
        task_queue=task_queue,
        workflow_id=workflow_id,
        payload={
            "chart_id": chart_id,
            "org": "acme",
            "external_id": f"ext-{chart_id}",
            "attempt": attempt,
            "params": params or {},
            "payload": payload,
        },
    )
    return workflow_id, run_id


def count_executions(workflow_id: str) -> int:
    """How many runs (open or closed) of `workflow_id` the visibility store holds."""

    async def count(client: Client) -> int:
        return (await client.count_workflows(f'WorkflowId = "{workflow_id}"')).count

    return temporal_call(count)


def test_run_fails_is_deterministic_per_chart_attempt() -> None:
    assert not any(run_fails(chart, 1, 0.0) for chart in range(500))
    assert all(run_fails(chart, 1, 1.0) for chart in range(500))
    assert [run_fails(chart, 2, 0.5) for chart in range(50)] == [run_fails(chart, 2, 0.5) for chart in range(50)]
    share = sum(run_fails(chart, 1, 0.3) for chart in range(2000)) / 2000
    assert 0.25 < share < 0.35


def test_workflow_code_imports_no_django() -> None:
    """The workflow sandbox re-imports the workflow module: it must not pull Django in."""
    probe = (
        "import sys, scheduling.temporal.workflows; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'orgs', 'charts', 'fairsched'}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "[]"


@pytest.mark.temporal
def test_demo_workflow_completes(temporal_worker: str, temporal_hints: list[tuple[int, str]]) -> None:
    started = time.monotonic()
    workflow_id, run_id = start_demo(temporal_worker, chart_id=101, payload={"duration": 0.5})

    outcome = closed_outcome(workflow_id)

    assert outcome.status == "completed"
    assert outcome.run_id == run_id
    assert outcome.close_time is not None
    assert (outcome.close_time - outcome.start_time).total_seconds() >= 0.5
    assert time.monotonic() - started < 10
    assert outcome.failure_message is None
    assert outcome.retry_after_seconds is None
    assert temporal_hints == [(101, "completed")]


@pytest.mark.temporal
def test_a_run_outlives_a_restart_of_its_worker(temporal_settings: Any, temporal_hints: list[tuple[int, str]]) -> None:
    """A worker stopped mid-run (a deploy, `make run` stopped and started again) hands the run to
    the next worker of its queue: the chart's attempt completes instead of failing with the
    worker's shutdown and costing the chart one of its attempts. The next worker resumes the work
    from the progress the stopped one saved with its last heartbeat, instead of starting over."""
    temporal_settings.TEMPORAL_WORKER_SHUTDOWN_SECONDS = 0.2
    queue = f"fairsched-test-{uuid.uuid4().hex[:12]}"
    first = WorkerThread(queue, temporal_hints)
    first.start()
    try:
        workflow_id, run_id = start_demo(queue, chart_id=120, payload={"duration": 4.0})
        eventually(lambda: started_activity_attempt(workflow_id) == 1)
        time.sleep(1.5)  # the first worker is working on it
    finally:
        first.stop()
    assert describe_workflow(workflow_id).status == "running"  # type: ignore[union-attr]
    saved = saved_progress(workflow_id)
    assert 1.0 <= saved < 4.0
    second = WorkerThread(queue, temporal_hints)
    second.start()
    try:
        outcome = closed_outcome(workflow_id)
        result = temporal_call(lambda client: client.get_workflow_handle(workflow_id).result())
    finally:
        second.stop()
    assert (outcome.status, outcome.run_id, outcome.failure_message) == ("completed", run_id, None)
    assert temporal_hints == [(120, "completed")]
    # The second attempt worked what was left (its sleep is on the loop's clock: never less, and
    # starting over would have been the whole 4 s).
    assert 4.0 - saved <= result["worked_seconds"] < 4.0 - saved / 2


def saved_progress(workflow_id: str) -> float:
    """The seconds worked that the workflow's pending activity saved with its last heartbeat."""

    async def progress(client: Client) -> float:
        handle = client.get_workflow_handle(workflow_id)
        (pending,) = (await handle.describe()).raw_description.pending_activities
        (details,) = await client.data_converter.decode(pending.heartbeat_details.payloads)
        return float(details)

    return temporal_call(progress)


@pytest.mark.temporal
def test_a_run_that_loses_its_worker_every_time_fails_after_five_losses(
    temporal_settings: Any, temporal_hints: list[tuple[int, str]]
) -> None:
    """A chart that takes its worker down every time (out of memory, say) is not handed from worker
    to worker until its run timeout: the fifth loss fails the run, and fairsched's attempts apply."""
    temporal_settings.TEMPORAL_WORKER_SHUTDOWN_SECONDS = 0.1
    queue = f"fairsched-test-{uuid.uuid4().hex[:12]}"
    workflow_id, _ = start_demo(queue, chart_id=121, payload={"duration": 60.0})
    for loss in range(1, WORKER_LOSS_RETRY.maximum_attempts + 1):
        assert describe_workflow(workflow_id).status == "running"  # type: ignore[union-attr]
        worker = WorkerThread(queue, temporal_hints)
        worker.start()
        try:
            eventually(lambda attempt=loss: started_activity_attempt(workflow_id) == attempt)  # type: ignore[misc]
        finally:
            worker.stop()
    worker = WorkerThread(queue, temporal_hints)  # runs the workflow's task that fails the run
    worker.start()
    try:
        assert closed_outcome(workflow_id).status == "failed"
    finally:
        worker.stop()


def started_activity_attempt(workflow_id: str) -> int:
    """The attempt of the workflow's activity that a worker is running (0: none is)."""

    async def attempt(client: Client) -> int:
        description = await client.get_workflow_handle(workflow_id).describe()
        pending = description.raw_description.pending_activities
        started = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        return max((p.attempt for p in pending if p.state == started), default=0)

    return temporal_call(attempt)


@pytest.mark.temporal
def test_payload_overrides_params(temporal_worker: str) -> None:
    workflow_id, _ = start_demo(
        temporal_worker,
        chart_id=102,
        params={"duration": 60, "fail_probability": 1.0},
        payload={"duration": 0.1, "fail_probability": 0.0},
    )

    assert closed_outcome(workflow_id).status == "completed"


@pytest.mark.temporal
def test_repeated_start_never_runs_twice(temporal_worker: str) -> None:
    workflow_id, run_id = start_demo(temporal_worker, chart_id=103, payload={"duration": 1.0})

    def repeat() -> str:
        return start_chart_workflow(
            workflow_type=DEMO_WORKFLOW_TYPE,
            task_queue=temporal_worker,
            workflow_id=workflow_id,
            payload={"chart_id": 103, "org": "acme", "external_id": "ext-103", "attempt": 1},
        )

    assert repeat() == run_id  # still running: the conflict policy
    assert closed_outcome(workflow_id).status == "completed"
    assert repeat() == run_id  # closed: the reuse policy

    outcome = describe_workflow(workflow_id)
    assert outcome is not None
    assert outcome.run_id == run_id
    assert outcome.status == "completed"
    assert eventually(lambda: count_executions(workflow_id)) == 1


@pytest.mark.temporal
def test_failing_workflow_reports_its_failure(temporal_worker: str, temporal_hints: list[tuple[int, str]]) -> None:
    workflow_id, _ = start_demo(temporal_worker, chart_id=104, payload={"duration": 0.1, "fail_probability": 1.0})

    outcome = closed_outcome(workflow_id)

    assert outcome.status == "failed"
    assert outcome.failure_message == "DemoFailure: chart 104 attempt 1 failed"
    assert not outcome.throttled
    assert outcome.retry_after_seconds is None
    assert outcome.provider is None
    assert temporal_hints == [(104, "failed")]


@pytest.mark.temporal
def test_throttled_failure_carries_retry_after_and_provider(temporal_worker: str) -> None:
    workflow_id, _ = start_demo(
        temporal_worker,
        chart_id=105,
        params={"provider": "gpu-east", "throttle_retry_after": 42},
        payload={"duration": 0.1, "fail_probability": 1.0},
    )

    outcome = closed_outcome(workflow_id)

    assert outcome.status == "failed"
    assert outcome.throttled
    assert outcome.retry_after_seconds == 42.0
    assert outcome.provider == "gpu-east"
    assert outcome.failure_message is not None
    assert outcome.failure_message.startswith("ProviderThrottled: ")


@pytest.mark.temporal
def test_bad_input_fails_the_workflow(temporal_worker: str) -> None:
    workflow_id, _ = start_demo(temporal_worker, chart_id=106, payload={"duration": "soon"})

    outcome = closed_outcome(workflow_id)

    assert outcome.status == "failed"
    assert outcome.failure_message is not None
    assert outcome.failure_message.startswith("BadChartInput: ")


@pytest.mark.temporal
def test_list_open_then_cancel(temporal_worker: str) -> None:
    prefix = f"chart-{uuid.uuid4().hex[:8]}-"
    workflow_id, _ = start_demo(temporal_worker, chart_id=107, payload={"duration": 60}, prefix=prefix)
    other_id, _ = start_demo(temporal_worker, chart_id=108, payload={"duration": 60}, prefix="other-")

    open_ids = eventually(lambda: list_open_workflow_ids(prefix))
    assert open_ids == {workflow_id}
    assert other_id in eventually(lambda: list_open_workflow_ids("other-"))

    cancel_workflow(workflow_id)
    cancel_workflow(other_id)

    assert closed_outcome(workflow_id).status == "canceled"
    assert closed_outcome(other_id).status == "canceled"
    eventually(lambda: not list_open_workflow_ids(prefix))
    cancel_workflow(workflow_id)  # closed: ignored
    terminate_workflow(workflow_id, reason="too late")  # closed: ignored
    assert closed_outcome(workflow_id).status == "canceled"


@pytest.mark.temporal
def test_terminate_with_a_reason(temporal_worker: str) -> None:
    workflow_id, _ = start_demo(temporal_worker, chart_id=111, payload={"duration": 60})

    terminate_workflow(workflow_id, reason="operator: stop it")

    outcome = closed_outcome(workflow_id)
    assert (outcome.status, outcome.failure_message, outcome.throttled) == ("terminated", "operator: stop it", False)


@pytest.mark.temporal
def test_the_execution_timeout_closes_a_workflow_no_worker_serves(temporal_settings: Any) -> None:
    workflow_id = f"chart-unserved-{uuid.uuid4().hex[:8]}"
    start_chart_workflow(
        workflow_type="fairsched.nobody-serves-this",
        task_queue=f"nobody-polls-{uuid.uuid4().hex[:8]}",
        workflow_id=workflow_id,
        payload={},
        execution_timeout=timedelta(seconds=1),
    )

    outcome = closed_outcome(workflow_id)
    assert outcome.status == "timed_out"
    assert outcome.throttled is False


@pytest.mark.temporal
def test_unknown_workflow(temporal_settings: Any) -> None:
    assert describe_workflow("chart-does-not-exist") is None
    cancel_workflow("chart-does-not-exist")
    terminate_workflow("chart-does-not-exist", reason="nothing there")


def _forked_child(workflow_id: str, answers: Any) -> None:
    """In a forked child: describe with the inherited module state and report what happened."""
    try:
        outcome = describe_workflow(workflow_id)
        inherited = temporal_client._INHERITED_BRIDGES
        bridge = temporal_client._BRIDGE
        assert bridge is not None
        answers.put(
            {
                "run_id": outcome.run_id if outcome else None,
                "bridge_pid_is_child": bridge.pid == os.getpid(),
                "inherited_pids": [b.pid for b in inherited],
                "fresh_client": all(
                    client is not old
                    for client in bridge.clients.values()
                    for b in inherited
                    for old in b.clients.values()
                ),
            }
        )
    except BaseException as err:
        answers.put({"error": repr(err)})


def _forking_master(workflow_id: str) -> None:
    """In a process of its own with a client and no worker, as Celery's master: describe (connecting
    this process's bridge), let its runtime's threads go idle, fork a child that describes with the
    inherited module state, and print the child's answer, its exit code and this process's pid as
    JSON, then describe again (the master's client still works)."""
    assert describe_workflow(workflow_id) is not None
    time.sleep(1.0)
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_forked_child, args=(workflow_id, answers))
    child.start()
    try:
        answer = answers.get(timeout=WAIT_SECONDS)
    except queue.Empty:
        answer = None
    child.join(WAIT_SECONDS)
    if child.is_alive():
        child.kill()
        child.join()
    again = describe_workflow(workflow_id)
    report = {"answer": answer, "exitcode": child.exitcode, "pid": os.getpid(), "again": again and again.run_id}
    print(json.dumps(report))


FORKING_MASTER = (
    "import sys, django; django.setup(); "
    "from tests.scheduling.temporal.test_temporal import _forking_master; _forking_master(sys.argv[1])"
)


@pytest.mark.temporal
def test_forked_child_connects_afresh(temporal_worker: str, temporal_settings: Any) -> None:
    """A process that has called Temporal forks a child, which builds a bridge of its own (runtime,
    loop, client) instead of using the one it inherited. The fork is made in a process of its own:
    forking this one, whose worker's threads are always mid-poll, copies their held locks into the
    child (a CI run under load crashed the child so, twice); Celery's children fork from a master
    with no worker in it."""
    workflow_id, run_id = start_demo(temporal_worker, chart_id=109, payload={"duration": 0.1})
    assert closed_outcome(workflow_id).run_id == run_id
    master = start(
        [sys.executable, "-c", FORKING_MASTER, workflow_id],
        cwd=REPO_ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": temporal_settings.TEMPORAL_ADDRESS, "TEMPORAL_NAMESPACE": "default"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = master.communicate(timeout=3 * WAIT_SECONDS)
    finally:
        end(master)
    assert master.returncode == 0, output
    report = json.loads(output.strip().splitlines()[-1])
    assert report == {
        "answer": {
            "run_id": run_id,
            "bridge_pid_is_child": True,
            "inherited_pids": [report["pid"]],
            "fresh_client": True,
        },
        "exitcode": 0,
        "pid": report["pid"],
        "again": run_id,
    }, output


@pytest.mark.temporal
def test_worker_command_hints_celery_and_stops_on_sigterm(temporal_settings: Any, tmp_path: Path) -> None:
    broker = service(start_redis(tmp_path))
    queue = f"fairsched-command-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "fairsched.settings",
        "TEMPORAL_ADDRESS": temporal_settings.TEMPORAL_ADDRESS,
        "REDIS_URL": broker.value,
        "CELERY_BROKER_URL": broker.value,
        "PYTHONUNBUFFERED": "1",
    }
    command = start(
        [sys.executable, "manage.py", "temporal_worker", "--task-queue", queue],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        workflow_id, _ = start_demo(queue, chart_id=110, payload={"duration": 0.2})
        assert closed_outcome(workflow_id).status == "completed"
        messages: list[bytes] = redis.Redis.from_url(broker.value).lrange("celery", 0, -1)  # type: ignore[assignment]
        headers = [json.loads(message)["headers"] for message in messages]
        assert [(h["task"], h["argsrepr"]) for h in headers] == [(RECONCILE_HINT_TASK, "[110]")]
        assert headers[0]["eta"] is not None
    finally:
        command.send_signal(signal.SIGTERM)
        try:
            output, _ = command.communicate(timeout=WAIT_SECONDS)
        finally:
            end(command)
            broker.stop()
        print(output.decode())  # pytest shows it when the test fails

    assert command.returncode == 0, output.decode()
    assert b"temporal worker stopped" in output
