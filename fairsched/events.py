"""Announcing changes after commit: a debounced replan and a small message to the live pages.

Services call `changed()` inside their transaction; nothing leaves the process unless the transaction
commits (Zulip's `send_event_on_commit`), so a rolled-back change never announces itself.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import threading
from typing import Any

from django.db import transaction

logger = logging.getLogger(__name__)

STAFF_GROUP = "staff"


def org_group(org_id: int) -> str:
    """The Channels group of one org's portal pages; customers only ever join their own."""
    return f"org-{org_id}"


def changed(*, kind: str, org_id: int | None = None, replan: bool = True, **data: Any) -> None:
    """After commit: tell the live pages that `kind` changed, and ask for a replan if the plan moves."""

    def announce() -> None:
        message = {"kind": kind, "org": org_id, **data}
        broadcast(STAFF_GROUP, message)
        if org_id is not None:
            broadcast(org_group(org_id), message)
        if replan:
            request_replan()

    transaction.on_commit(announce)


def broadcast(group: str, message: dict[str, Any]) -> None:
    """Send a 'tell clients what to refetch' message to a Channels group, without waiting for it.

    The message is handed to this process's sender thread (`_Sender`), which sends in order; the
    caller (a request, a pass) goes on at once. A Redis blip only logs: the live pages resync on
    their next message, and a lost one must not fail a write."""
    _sender.put(group, message)


class _Sender:
    """One thread per process that sends the broadcasts, in the order they were made.

    Sending from the request itself cost a submission two hops to the event loop (`async_to_sync`)
    and several Redis round trips, while it held the web worker's one sync thread: most of a single
    submit's time under load (bench/bench_api.py). The thread starts on first use, again after a
    fork (Celery's pool children, gunicorn's workers), and is given a moment to empty its queue when
    the process exits.
    """

    EXIT_FLUSH_SECONDS = 2.0

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, dict[str, Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def put(self, group: str, message: dict[str, Any]) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                if self._pid != os.getpid():
                    self._queue = queue.SimpleQueue()  # a forked child does not send its parent's backlog
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="fairsched-broadcast", daemon=True)
                self._thread.start()
        self._queue.put((group, message))

    def flush(self) -> None:
        """Send what is queued, then stop (at process exit)."""
        thread = self._thread
        if thread is None or self._pid != os.getpid() or not thread.is_alive():
            return
        self._queue.put(None)
        thread.join(self.EXIT_FLUSH_SECONDS)

    def _run(self) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        loop = asyncio.new_event_loop()
        try:
            while (item := self._queue.get()) is not None:
                if layer is None:
                    continue
                group, message = item
                try:
                    loop.run_until_complete(layer.group_send(group, {"type": "fairsched.event", "message": message}))
                except Exception:  # the live pages resync on their next message
                    logger.warning("broadcast to %s failed", group, exc_info=True)
        finally:
            loop.close()


_sender = _Sender()
atexit.register(_sender.flush)


def request_replan() -> None:
    """Queue a debounced replan (the task itself coalesces bursts; see scheduling.tasks)."""
    from scheduling.tasks import replan_soon

    try:
        replan_soon()
    except Exception:  # beat replans every few seconds anyway
        logger.warning("could not queue a replan", exc_info=True)
