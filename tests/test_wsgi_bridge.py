"""The ASGI application's HTTP half: Django's WSGI handler, each request whole in a pool thread
(fairsched/wsgi_bridge.py), driven as uvicorn drives it."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.test import override_settings

from charts.models import Chart
from fairsched.wsgi_bridge import BridgedWSGIHandler, WSGIBridge
from orgs.access import api_token_issue
from tests.conftest import Tenants
from tests.factories import ChartFactory

LIMIT = 10_000
PIECE = 4096


class Connection:
    """One request as uvicorn hands it over: its body in pieces, then the disconnect once the client goes."""

    def __init__(self, pieces: list[bytes], *, cut: bool = False) -> None:
        """`cut`: the client goes after its last piece, which promised more."""
        self.pieces = pieces
        self.cut = cut
        self.received = 0
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        if self.received < len(self.pieces):
            self.received += 1
            more = self.cut or self.received < len(self.pieces)
            return {"type": "http.request", "body": self.pieces[self.received - 1], "more_body": more}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return list(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(message.get("body", b"") for message in self.sent[1:])


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]] = []) -> dict[str, Any]:  # noqa: B006
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }


def serve(
    app: WSGIBridge, method: str, path: str, headers: list[tuple[bytes, bytes]], pieces: list[bytes]
) -> Connection:
    client = Connection(pieces)
    asyncio.run(app(scope(method, path, headers), client.receive, client.send))
    return client


@pytest.fixture
def bridge() -> Iterator[WSGIBridge]:
    app = WSGIBridge(BridgedWSGIHandler(), threads=1)
    yield app
    app.pool.shutdown()


class Handler:
    """A stand-in for Django's handler: answers with what `respond` returns for the environ."""

    def __init__(self, respond: Callable[[dict[str, Any]], Any]) -> None:
        self.respond = respond

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        response = self.respond(environ)
        start_response(
            f"{response.status_code} {response.reason_phrase}",
            [*response.items(), *(("Set-Cookie", c.output(header="")) for c in response.cookies.values())],
        )
        return response


def stand_in(respond: Callable[[dict[str, Any]], Any], threads: int = 2) -> WSGIBridge:
    return WSGIBridge(Handler(respond), threads=threads)  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
def test_a_declared_body_past_the_limit_is_413_without_being_received(tenants: Tenants, bridge: WSGIBridge) -> None:
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)
    pieces = [b"x" * PIECE] * 250  # 1 MB, 100 x the limit
    headers = [
        (b"authorization", f"Token {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(PIECE * len(pieces)).encode()),
    ]
    client = serve(bridge, "POST", "/api/v1/charts/", headers, pieces)
    assert client.status == 413, client.body
    assert client.received <= LIMIT // PIECE + 2
    assert Chart.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=LIMIT)
def test_a_chunked_body_past_the_limit_is_413_after_reading_no_more_than_the_limit(
    tenants: Tenants, bridge: WSGIBridge
) -> None:
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)
    pieces = [b"x" * PIECE] * 250
    headers = [
        (b"authorization", f"Token {token}".encode()),
        (b"content-type", b"application/json"),
        (b"transfer-encoding", b"chunked"),
    ]
    client = serve(bridge, "POST", "/api/v1/charts/", headers, pieces)
    assert client.status == 413, client.body
    assert client.received <= LIMIT // PIECE + 2


@pytest.mark.django_db(transaction=True)
def test_a_body_in_pieces_is_read_whole(tenants: Tenants, bridge: WSGIBridge) -> None:
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)
    body = json.dumps({"workflow": "render", "external_id": "pieces", "payload": {"n": "y" * 9000}}).encode()
    pieces = [body[start : start + 1000] for start in range(0, len(body), 1000)]
    for length in ([(b"content-length", str(len(body)).encode())], [(b"transfer-encoding", b"chunked")]):
        headers = [(b"authorization", f"Token {token}".encode()), (b"content-type", b"application/json"), *length]
        client = serve(bridge, "POST", "/api/v1/charts/", headers, list(pieces))
        assert client.status in (200, 201), client.body
    assert Chart.objects.get().payload == {"n": "y" * 9000}


@pytest.mark.django_db(transaction=True)
def test_the_database_connection_is_given_back_after_each_request(tenants: Tenants, bridge: WSGIBridge) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)
    headers = [(b"authorization", f"Token {token}".encode()), (b"accept", b"application/json")]
    for _ in range(3):
        client = serve(bridge, "GET", f"/api/v1/charts/{chart.pk}/", headers, [b""])
        assert client.status == 200
        assert json.loads(client.body)["id"] == chart.pk
        # The pool's one thread served the request; its connection was closed by request_finished.
        assert bridge.pool.submit(lambda: connection.connection).result() is None


def test_a_slow_request_does_not_hold_up_a_fast_one() -> None:
    release = threading.Event()

    def respond(environ: dict[str, Any]) -> HttpResponse:
        if environ["PATH_INFO"] == "/slow":
            assert release.wait(30)
        return HttpResponse(environ["PATH_INFO"])

    app = stand_in(respond)

    async def both() -> tuple[Connection, Connection, bool]:
        slow, fast = Connection([b""]), Connection([b""])
        slow_call = asyncio.ensure_future(app(scope("GET", "/slow"), slow.receive, slow.send))
        await app(scope("GET", "/fast"), fast.receive, fast.send)
        slow_waiting = not slow_call.done()
        release.set()
        await slow_call
        return slow, fast, slow_waiting

    slow, fast, slow_waiting = asyncio.run(both())
    app.pool.shutdown()
    assert slow_waiting
    assert (fast.body, slow.body) == (b"/fast", b"/slow")


def test_a_client_that_disconnects_stops_a_streaming_answer() -> None:
    produced: list[int] = []
    closed = threading.Event()
    client = Connection([b""])

    def respond(environ: dict[str, Any]) -> StreamingHttpResponse:
        def parts() -> Iterator[bytes]:
            for number in range(1000):
                produced.append(number)
                if number == 2:
                    client.gone.set()
                yield b"z" * 70_000

        response = StreamingHttpResponse(parts())
        response._resource_closers.append(closed.set)
        return response

    app = stand_in(respond)
    asyncio.run(app(scope("GET", "/stream"), client.receive, client.send))
    app.pool.shutdown()
    assert client.status == 200
    assert len(produced) < 10
    assert closed.is_set()


def test_a_streaming_answer_is_sent_whole_in_batches() -> None:
    app = stand_in(lambda environ: StreamingHttpResponse(b"%d\n" % n for n in range(20_000)))
    client = serve(app, "GET", "/numbers", [], [b""])
    app.pool.shutdown()
    assert client.body == b"".join(b"%d\n" % n for n in range(20_000))
    assert len(client.sent) < 10
    assert client.sent[-1]["more_body"] is False


def test_every_cookie_is_a_header_of_its_own() -> None:
    def respond(environ: dict[str, Any]) -> HttpResponse:
        response = HttpResponse("ok")
        response.set_cookie("one", "1")
        response.set_cookie("two", "2")
        return response

    app = stand_in(respond)
    client = serve(app, "GET", "/", [], [b""])
    app.pool.shutdown()
    cookies = [value for name, value in client.headers if name == b"set-cookie"]
    assert [cookie.split(b";")[0].strip() for cookie in cookies] == [b"one=1", b"two=2"]


def test_the_environ_joins_repeated_headers_and_drops_underscored_ones() -> None:
    seen: dict[str, Any] = {}

    def respond(environ: dict[str, Any]) -> HttpResponse:
        seen.update(environ)
        return HttpResponse("ok")

    app = stand_in(respond)
    headers = [(b"x-forwarded-for", b"10.0.0.1"), (b"x-forwarded-for", b"10.0.0.2"), (b"content-type", b"text/plain")]
    headers.append((b"x_forwarded_for", b"6.6.6.6"))
    serve(app, "GET", "/p\u00e9/x", headers, [b""])
    app.pool.shutdown()
    assert seen["HTTP_X_FORWARDED_FOR"] == "10.0.0.1,10.0.0.2"
    assert seen["CONTENT_TYPE"] == "text/plain"
    assert "CONTENT_LENGTH" not in seen
    assert seen["PATH_INFO"] == "/p\u00e9/x".encode().decode("latin1")
    assert (seen["REMOTE_ADDR"], seen["SERVER_NAME"], seen["wsgi.url_scheme"]) == ("127.0.0.1", "testserver", "http")


@pytest.mark.django_db(transaction=True)
def test_the_health_endpoint_and_its_headers(bridge: WSGIBridge) -> None:
    client = serve(bridge, "GET", "/healthz", [], [b""])
    assert client.status == 200
    assert json.loads(client.body) == {"status": "ok"}
    head = serve(bridge, "HEAD", "/healthz", [], [b""])
    assert head.status == 200


@pytest.mark.django_db(transaction=True)
def test_a_client_gone_mid_body_writes_nothing_and_logs_no_error(
    tenants: Tenants, bridge: WSGIBridge, caplog: pytest.LogCaptureFixture
) -> None:
    token = api_token_issue(user=tenants.member_a, org=tenants.org_a)
    body = json.dumps({"workflow": "render", "external_id": "cut", "payload": {"n": "y" * 9000}}).encode()
    headers = [
        (b"authorization", f"Token {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    client = Connection([body[:1000]], cut=True)
    client.gone.set()
    asyncio.run(bridge(scope("POST", "/api/v1/charts/", headers), client.receive, client.send))
    assert client.received == 1
    assert Chart.objects.count() == 0
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


@pytest.mark.django_db(transaction=True)
def test_a_static_file_is_served_whole(settings: Any) -> None:
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True
    app = WSGIBridge(BridgedWSGIHandler(), threads=1)
    client = serve(app, "GET", "/static/favicon.svg", [], [b""])
    app.pool.shutdown()
    expected = (Path(__file__).resolve().parents[1] / "static" / "favicon.svg").read_bytes()
    assert client.status == 200
    assert client.body == expected
    assert (b"content-length", str(len(expected)).encode()) in client.headers
