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
   horizon at least as late) and send to every endpoint that got deliveries, from this process's
   `SENDERS` threads (one endpoint at a time each; `feed.services` keeps one sender per endpoint):
   not a sender task, which waited in the pool's queue behind the scheduler's passes
   (bench/bench_webhooks.py --demo-load).
4. If the horizon had passed the latest hinted transaction, its events are collected: back to 2.
   Otherwise wait `HORIZON_POLL_SECONDS` and go back to 3, for `PATIENCE_SECONDS` at most.
A lost connection is opened again after `RECONNECT_SECONDS`; the tick delivers meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
from django.db import connection

from feed import services
from feed.selectors import feed_horizon

logger = logging.getLogger(__name__)

CHANNEL = "fairsched_feed"
HORIZON_POLL_SECONDS = 0.02
PATIENCE_SECONDS = 2.0
RECONNECT_SECONDS = 1.0
WAIT_SECONDS = 1.0  # how often the thread looks whether it was asked to stop
SENDERS = 4  # endpoints sent to at once (a slow one holds up only its thread)


class FeedListener(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="fairsched-feed-listener", daemon=True)
        self.stopped = threading.Event()
        self.senders = ThreadPoolExecutor(SENDERS, thread_name_prefix="fairsched-webhook-sender")

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
                    self.deliver_through(max(latest))

    def deliver_through(self, txid: int) -> None:
        """Steps 3 and 4: collect and send until the horizon has passed transaction `txid`."""
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            passed = feed_horizon() > txid
            for endpoint_id in services.webhook_deliveries_collect_all():
                self.senders.submit(send, endpoint_id)
            if passed or time.monotonic() > deadline:
                return
            time.sleep(HORIZON_POLL_SECONDS)


def send(endpoint_id: int) -> None:
    """One endpoint's due deliveries, on a sender thread (its connection kept while it is usable)."""
    connection.close_if_unusable_or_obsolete()
    try:
        services.webhook_endpoint_send(endpoint_id=endpoint_id)
    except Exception:
        logger.warning("sending to webhook endpoint %s failed; the tick tries again", endpoint_id, exc_info=True)
        connection.close()


def start() -> FeedListener:
    listener = FeedListener()
    listener.start()
    return listener
