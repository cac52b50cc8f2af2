"""A minimal receiver of fairsched's webhooks: plain Python (the standard library), nothing from fairsched.

    FAIRSCHED_WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py --port 8080

It checks each delivery's `Fairsched-Signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
with the endpoint's secret), refuses one signed outside the replay window (5 minutes), answers a
duplicate (an `Idempotency-Key` seen before: a retry, or a "send again") 200 without handling it
twice, and prints each new event. Answer 2xx quickly: fairsched retries anything else, with backoff,
and keeps every later event of the endpoint waiting behind it (deliveries go in order).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLAY_WINDOW_SECONDS = 300
MAX_BODY_BYTES = 1024 * 1024
REMEMBERED_KEYS = 100_000


class BadSignature(ValueError):
    """The delivery is not from fairsched, or is too old (a replay)."""


def verify(
    *, secret: str, header: str, body: bytes, now: float | None = None, window: float = REPLAY_WINDOW_SECONDS
) -> None:
    """Accept a body whose signature header is fairsched's for `secret` and recent; else `BadSignature`.

    1. Parse `t=...,v1=...` (several `v1` may come while a secret rotates: any may match).
    2. Refuse a timestamp further than `window` seconds from now (a replayed delivery).
    3. Recompute the HMAC over "<t>.<body>" and compare in constant time.
    """
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        raise BadSignature("no timestamp in the signature header") from None
    if abs((time.time() if now is None else now) - timestamp) > window:
        raise BadSignature("the signature's timestamp is outside the replay window")
    expected = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, given) for given in parts.get("v1", [])):
        raise BadSignature("the signature does not match")


class Receiver:
    """What the handler shares: the secret, the keys already handled, what to do with an event."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        """Whether this idempotency key is new (remembering the latest REMEMBERED_KEYS)."""
        with self.lock:
            if key in self.seen:
                return False
            self.seen[key] = None
            if len(self.seen) > REMEMBERED_KEYS:
                self.seen.popitem(last=False)
            return True

    def handle(self, event: dict[str, Any]) -> None:
        """Your code here: e.g. tell your EHR that a chart is done."""
        print(f"{event['type']} {json.dumps(event['data'], sort_keys=True)}", flush=True)


def handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._answer(413, "too large")
                return
            body = self.rfile.read(length)
            try:
                verify(secret=receiver.secret, header=self.headers.get("Fairsched-Signature", ""), body=body)
            except BadSignature as refused:
                self._answer(400, str(refused))
                return
            key = self.headers.get("Idempotency-Key", "")
            if key and not receiver.first_time(key):
                self._answer(200, "duplicate")
                return
            receiver.handle(json.loads(body))
            self._answer(200, "ok")

        def _answer(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    secret = os.environ.get("FAIRSCHED_WEBHOOK_SECRET", "")
    if not secret:
        print("set FAIRSCHED_WEBHOOK_SECRET to the endpoint's secret", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer((args.host, args.port), handler_for(Receiver(secret)))
    print(f"listening on http://{args.host}:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
