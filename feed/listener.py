"""The webhooks' wake-up at commit: a thread of each Celery worker that hears the feed's commits and
starts their deliveries at once, instead of at the next tick (`feed.tasks.webhooks_tick`, which stays
the safety net: for a hint lost with a connection, or one that waited past its patience).

Every commit that writes a feed log notifies `fairsched_feed` with its transaction id (a trigger:
feed/migrations/0002). A commit can come before the feed's horizon passes it: a transaction that
began earlier and is still open holds the horizon back, and the feed serves nothing at or above it
(`feed.selectors`). So a hint is only done with once the horizon has passed its transaction. Steps:

1. LISTEN on a connection of its own (autocommit: an open transaction would hold the horizon back).
2. Wait for a hint; take every hint queued meanwhile too, and keep the latest transaction id.
3. Take the horizon, then collect each active endpoint's new events (each collect reads to a
   horizon at least as late) and send a sender task to every endpoint that got deliveries.
4. If the horizon had passed the latest hinted transaction, its events are collected: back to 2.
   Otherwise wait `HORIZON_POLL_SECONDS` and go back to 3, for `PATIENCE_SECONDS` at most.
A lost connection is opened again after `RECONNECT_SECONDS`; the tick delivers meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from django.db import connection

from feed import services
from feed.selectors import feed_horizon
from feed.tasks import webhook_send

logger = logging.getLogger(__name__)

CHANNEL = "fairsched_feed"
HORIZON_POLL_SECONDS = 0.02
PATIENCE_SECONDS = 2.0
RECONNECT_SECONDS = 1.0
WAIT_SECONDS = 1.0  # how often the thread looks whether it was asked to stop


class FeedListener(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="fairsched-feed-listener", daemon=True)
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._listen()
            except Exception:
                logger.warning("the feed listener lost its connection; the tick delivers meanwhile", exc_info=True)
                self.stopped.wait(RECONNECT_SECONDS)
            finally:
                connection.close()

    def _listen(self) -> None:
        with psycopg.connect(**connection.get_connection_params(), autocommit=True) as hints:
            hints.execute(f"LISTEN {CHANNEL}")
            while not self.stopped.is_set():
                latest = [int(hint.payload) for hint in hints.notifies(timeout=WAIT_SECONDS, stop_after=1)]
                if latest:
                    latest += [int(hint.payload) for hint in hints.notifies(timeout=0)]
                    deliver_through(max(latest))


def deliver_through(txid: int) -> None:
    """Steps 3 and 4: collect and send until the horizon has passed transaction `txid`."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        passed = feed_horizon() > txid
        for endpoint_id in services.webhook_deliveries_collect_all():
            webhook_send.delay(endpoint_id)
        if passed or time.monotonic() > deadline:
            return
        time.sleep(HORIZON_POLL_SECONDS)


def start() -> FeedListener:
    listener = FeedListener()
    listener.start()
    return listener
