"""Announcing changes after commit: a debounced replan and a small message to the live pages.

Services call `changed()` inside their transaction; nothing leaves the process unless the transaction
commits (Zulip's `send_event_on_commit`), so a rolled-back change never announces itself.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import queue
import threading
import time
from typing import Any

from celery import current_app
from django.core.cache import cache
from django.db import transaction

logger = logging.getLogger(__name__)

STAFF_GROUP = "staff"
# Every portal page listens here for "a pass ran" (a replan moved ETAs, a dispatch started charts): a
# hint that carries no org's data, after which a page refetches its part.
PASSES_GROUP = "passes"
# The replan task, sent by name: scheduling's tasks announce through this module, so it cannot import them.
REPLAN_TASK = "scheduling.tasks.replan"
# Set while a replan is queued and has not begun; the task clears it as it starts.
REPLAN_PENDING_KEY = "fairsched:replan-pending"


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


def pass_done(*, kind: str) -> None:
    """After commit: tell every portal page that a pass (`kind`: "plan", "dispatch") ran."""
    transaction.on_commit(lambda: broadcast(PASSES_GROUP, {"kind": kind}))


def broadcast(group: str, message: dict[str, Any]) -> None:
    """Send a 'tell clients what to refetch' message to a Channels group, without waiting for it.

    The message is handed to this process's sender thread (`_Sender`), which sends in order; the
    caller (a request, a pass) goes on at once. A Redis blip only logs: the live pages resync on
    their next message, and a lost one must not fail a write."""
    _sender.put((group, message))


def request_replan() -> None:
    """Ask for a debounced replan, without waiting for it (the sender thread asks; requests queued
    together are one request, and `replan_soon` coalesces bursts further)."""
    _sender.put(REPLAN)


def replan_soon() -> None:
    """Ask for a replan now; if one is already queued and has not begun, this one rides along.

    The task is sent by name through the Celery app (as the Temporal worker sends its reconcile hint)."""
    if cache.add(REPLAN_PENDING_KEY, 1, timeout=10):
        current_app.send_task(REPLAN_TASK)


REPLAN = "replan"
Announcement = tuple[str, dict[str, Any]] | str


class _Sender:
    """One thread per process that sends the announcements (broadcasts, replan requests) in the
    order they were made.

    Sending from the request itself cost a submission two hops to the event loop (`async_to_sync`),
    several Redis round trips and a Celery publish, while it held the web worker's one sync thread:
    most of a single submit's time under load (bench/bench_api.py). Steps of the thread:

    1. Wait for an announcement. If the last batch went less than GATHER_SECONDS ago (a burst),
       wait until that long after it, then take every announcement queued meanwhile: a burst is
       sent in batches at most that often, and a lone announcement (a lever) goes at once.
    2. Merge the batch's broadcasts that say the same to the same group (`merged`): a burst of
       single submissions of one org is one broadcast per group, its `submitted` counts summed.
    3. Send the broadcasts in order (a Redis blip only logs: the live pages resync on their next).
    4. Ask for one replan if any of them asked for one (a failure only logs: beat replans anyway).

    Each send costs this thread CPU and a wake-up, which one by one came to a large share of a single
    submit's web CPU (bench/bench_submit_cpu.py); in batches it is shared.

    The thread starts on first use, again after a fork (Celery's pool children, gunicorn's
    workers), and is given a moment to empty its queue when the process exits.
    """

    EXIT_FLUSH_SECONDS = 2.0
    # The live pages' hints wait at most this much longer during a burst (they refetch what a hint
    # names, well within their update lag: bench/bench_dashboard.py).
    GATHER_SECONDS = 0.05

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Announcement | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def put(self, announcement: Announcement) -> None:
        with self._lock:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                if self._pid != os.getpid():
                    self._queue = queue.SimpleQueue()  # a forked child does not send its parent's backlog
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="fairsched-announce", daemon=True)
                self._thread.start()
        self._queue.put(announcement)

    def flush(self) -> None:
        """Send what is queued, then stop (at process exit)."""
        thread = self._thread
        if thread is None or self._pid != os.getpid() or not thread.is_alive():
            return
        self._queue.put(None)
        thread.join(self.EXIT_FLUSH_SECONDS)

    def _run(self) -> None:
        from channels.layers import get_channel_layer

        loop = asyncio.new_event_loop()
        last_batch = -self.GATHER_SECONDS
        try:
            while (first := self._queue.get()) is not None:
                time.sleep(max(0.0, last_batch + self.GATHER_SECONDS - time.monotonic()))
                last_batch = time.monotonic()
                batch, stop = [first], False
                while not self._queue.empty():
                    more = self._queue.get()
                    if more is None:
                        stop = True
                        break
                    batch.append(more)
                layer = get_channel_layer()  # each batch: the process's layer now (a test may replace it)
                for item in merged(batch):
                    if isinstance(item, tuple) and layer is not None:
                        group, message = item
                        try:
                            loop.run_until_complete(
                                layer.group_send(group, {"type": "fairsched.event", "message": message})
                            )
                        except Exception:
                            logger.warning("broadcast to %s failed", group, exc_info=True)
                if REPLAN in batch:
                    _replan_soon()
                if stop:
                    break
        finally:
            loop.close()


def merged(batch: list[Announcement]) -> list[Announcement]:
    """The batch with the broadcasts that say the same to the same group made one, where the first
    was, its `submitted` the sum of theirs (a hint names what to refetch: once is enough, and every
    change of the batch is committed before any of it is sent). Replan requests stay as they are."""
    order: list[tuple[str, str] | str] = []
    broadcasts: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for item in batch:
        if isinstance(item, str):
            order.append(item)
            continue
        group, message = item
        said = {key: value for key, value in message.items() if key != "submitted"}
        key = (group, json.dumps(said, sort_keys=True, default=str))
        if key not in broadcasts:
            broadcasts[key] = item
            order.append(key)
        elif "submitted" in message:
            earlier = broadcasts[key][1]
            broadcasts[key] = (group, {**earlier, "submitted": earlier.get("submitted", 0) + message["submitted"]})
    return [broadcasts[key] if isinstance(key, tuple) else key for key in order]


def _replan_soon() -> None:
    try:
        replan_soon()
    except Exception:  # beat replans every few seconds anyway
        logger.warning("could not queue a replan", exc_info=True)


_sender = _Sender()
atexit.register(_sender.flush)
