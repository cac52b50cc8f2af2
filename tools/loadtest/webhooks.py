"""The load run's own webhook receiver: on 127.0.0.1, in the runner's process, it checks each
delivery's signature with examples/webhook_receiver.py's `verify` and records it (event id,
idempotency key, received at, signature ok), answering 200 to every good one (a repeat too)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from examples.webhook_receiver import MAX_BODY_BYTES, BadSignature, verify

SIGNATURE_HEADER = "Fairsched-Signature"
KEY_HEADER = "Idempotency-Key"


class RecordingReceiver:
    def __init__(self) -> None:
        self.secret = ""
        self.receipts: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received = time.time()
                length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY_BYTES)
                body = self.rfile.read(length)
                ok = True
                try:
                    verify(secret=receiver.secret, header=self.headers.get(SIGNATURE_HEADER, ""), body=body)
                    event = str(json.loads(body)["id"])
                except (BadSignature, ValueError, KeyError, TypeError):
                    ok, event = False, ""
                with receiver._lock:
                    receiver.receipts.append(
                        {
                            "event": event,
                            "key": self.headers.get(KEY_HEADER, ""),
                            "received": received,
                            "signature_ok": ok,
                        }
                    )
                self.send_response(200 if ok else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.receipts)


def feed_and_log(*, event_types: list[str], after_cursor: str) -> dict[str, Any]:
    """The change feed read as staff to its end (from the endpoint's first position) and the event log's
    ChartEvent / OrgChange rows (every one), each event and row named the same way."""
    from charts.models import ChartEvent
    from feed.selectors import START, feed_read, position_decode
    from orgs.models import OrgChange

    feed: list[dict[str, Any]] = []
    start, after = position_decode(after_cursor), START
    while True:
        page = feed_read(after=after, org_ids=None, limit=500)
        for event in page.events:
            feed.append(
                {
                    "id": event.id,
                    "type": event.type,
                    "committed": event.at.timestamp(),
                    "row": _row(event),
                    "subscribed": position_decode(event.id) > start,
                }
            )
        if page.cursor == after:
            break
        after = page.cursor
    log = [
        ["chart", chart_id, from_state, to_state, at.isoformat()]
        for chart_id, from_state, to_state, at in ChartEvent.objects.values_list(
            "chart_id", "from_state", "to_state", "at"
        )
    ]
    log += [
        ["org", slug, name, old, new, at.isoformat()]
        for slug, name, old, new, at in OrgChange.objects.values_list(
            "org__slug", "field", "old_value", "new_value", "at"
        )
    ]
    return {"event_types": event_types, "feed": feed, "event_log": log}


def _row(event: Any) -> list[Any] | None:
    if event.type.startswith("chart."):
        return ["chart", event.chart, event.from_state, event.to_state, event.at.isoformat()]
    if event.field is not None and event.type != "scheduler.changed" and event.type != "org.clear_time_slipped":
        return ["org", event.org, event.field, event.old_value, event.new_value, event.at.isoformat()]
    return None
