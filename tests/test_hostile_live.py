"""Hostile input against the real ASGI server (daphne): chunked bodies, WebSocket handshakes to unknown
paths, and a probe of the other classes, with the server's log checked for tracebacks afterwards.

The Django test client cannot send a chunked body nor open a WebSocket, so these go over a socket.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from charts.models import Chart
from orgs.access import api_token_issue
from tests.conftest import Tenants
from tests.dashboard.live import daphne
from tests.database import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def live(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """daphne on the test database, with a small body limit; yields its URL and its log."""
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with daphne({"DATABASE_URL": database_url(), "FAIRSCHED_MAX_BODY_BYTES": str(LIMIT)}, log_to=log) as base:
        yield base, log


def connection(base: str) -> http.client.HTTPConnection:
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)


def chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def post_chunked(base: str, path: str, body: bytes, token: str) -> tuple[int, Any]:
    conn = connection(base)
    conn.request(
        "POST",
        path,
        body=chunks(body),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, json.loads(raw) if raw else None


def test_a_chunked_body_is_read(live: tuple[str, Path], tenants: Tenants) -> None:
    base, _ = live
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)  # type: ignore[arg-type]
    body = json.dumps({"workflow": "render", "external_id": "chunked", "payload": {"n": "x" * 5000}}).encode()

    status, answer = post_chunked(base, "/api/v1/charts/", body, token)

    assert status == 201, answer
    assert answer["external_id"] == "chunked"
    assert Chart.objects.get(external_id="chunked").payload == {"n": "x" * 5000}


def test_a_chunked_body_past_the_limit_is_413(live: tuple[str, Path], tenants: Tenants) -> None:
    base, _ = live
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)  # type: ignore[arg-type]
    body = json.dumps({"workflow": "render", "external_id": "big", "payload": {"n": "x" * LIMIT}}).encode()

    status, answer = post_chunked(base, "/api/v1/charts/", body, token)

    assert status == 413, answer
    assert not Chart.objects.exists()


def websocket_handshake(base: str, path: str) -> str:
    """Open a WebSocket handshake by hand; return the server's status line."""
    parts = urlsplit(base)
    key = base64.b64encode(b"fairsched-probe!").decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {base}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=30) as sock:
        sock.sendall(request.encode())
        answer = sock.recv(4096).decode("latin1")
    return answer.split("\r\n", 1)[0]


@pytest.mark.parametrize("path", ["/ws/", "/ws/portal/acme/../beta/", "/ws/nothing/here/", "/ws/portal/%00/"])
def test_an_unknown_websocket_path_is_refused(live: tuple[str, Path], tenants: Tenants, path: str) -> None:
    base, _ = live

    status_line = websocket_handshake(base, path)

    assert status_line.startswith("HTTP/1.1 403"), status_line


def test_the_probe_leaves_no_traceback(live: tuple[str, Path], tenants: Tenants) -> None:
    """An attacker's sweep of the classes on the live server: no 5xx, and nothing in the log."""
    base, log = live
    token = api_token_issue(user=tenants.staff, staff=True)  # type: ignore[arg-type]
    forged = base64.b64encode(b"p=abc").decode()
    probes: list[tuple[str, str, bytes | None]] = [
        ("GET", f"/api/v1/charts/?cursor={forged}", None),
        ("GET", f"/api/v1/provider-pauses/?cursor={forged}", None),
        ("GET", "/api/v1/charts/?external_id=%00", None),
        ("GET", "/dashboard/queue/?org=%00", None),
        ("GET", "/admin/charts/chart/?q=%00", None),
        ("POST", "/api/v1/charts/", b'{"workflow": "render", "external_id": "a", "payload": ' + b"[" * 100_000),
        ("POST", "/api/v1/charts/", b'{"workflow": "render", "external_id": "s", "payload": {"a": "\\ud800"}}'),
        ("POST", "/api/v1/charts/", b'{"workflow": "render", "external_id": 5}'),
        ("POST", "/api/v1/charts/", b'{"workflow": "render", "external_id": "d", "external_id": "e"}'),
        ("POST", "/api/v1/scheduler/plan-preview/", b'{"weights": ["beta"]}'),
        ("PATCH", "/api/v1/orgs/acme/", b'{"max_concurrency": 100000000000000}'),
    ]
    for method, path, body in probes:
        conn = connection(base)
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        conn.close()
        assert response.status < 500, (method, path, response.status)
    for path in ("/ws/", "/ws/portal/acme/../beta/"):
        websocket_handshake(base, path)

    logged = log.read_text(errors="replace")
    assert "Traceback" not in logged, logged[-3000:]
    assert " 500 " not in logged
