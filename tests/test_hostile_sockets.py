"""Hostile WebSocket clients over the full ASGI stack and the real Redis layer: unknown paths are refused
at the handshake, bad frames are answered and ignored, an oversized frame closes the socket, and logging
out, an expired session or a flushed one closes the session's sockets."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.sessions.models import Session
from django.db import connections
from django.test import Client
from django.utils import timezone

from common.events import STAFF_GROUP, org_group
from common.sockets import LOGGED_OUT, TOO_BIG
from fairsched.asgi import application
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db(transaction=True)

EVENT = {"type": "fairsched.event", "message": {"kind": "plan"}}


@pytest.fixture(autouse=True)
async def close_consumer_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def headers_for(client: Client | None) -> list[tuple[bytes, bytes]]:
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if client is not None:
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return headers


async def open_socket(path: str, client: Client | None) -> tuple[WebsocketCommunicator, bool]:
    socket = WebsocketCommunicator(application, path, headers=headers_for(client))
    connected, _ = await socket.connect(timeout=5)
    return socket, connected


@pytest.mark.parametrize(
    "path",
    [
        "/ws/",
        "/ws",
        "/",
        "/ws/portal/",
        "/ws/portal/acme/../beta/",
        "/ws/portal/acme/extra/",
        "/ws/dashboard/x/",
        "/ws/portal/%00/",
        "/api/v1/charts/",
        "/ws/" + "a" * 5000 + "/",
    ],
)
@pytest.mark.parametrize("who", [None, "staff", "member_a"])
async def test_an_unknown_path_is_refused_at_the_handshake(tenants: Tenants, path: str, who: str | None) -> None:
    client = await sync_to_async(logged_in)(getattr(tenants, who)) if who else None

    socket, connected = await open_socket(path, client)

    assert not connected
    await socket.disconnect()


FRAMES: list[Any] = [
    "not json",
    "",
    "[1, 2]",
    '"ping"',
    "null",
    '{"type": "ping", "type": "pong"}',
    '{"a": ' * 5000 + "1" + "}" * 5000,
    "[" * 60_000,
    '{"type": "\\ud800"}',
    b"\x00\xff binary",
]


@pytest.mark.parametrize("frame", FRAMES, ids=range(len(FRAMES)))
@pytest.mark.parametrize(("who", "path"), [("staff", "/ws/dashboard/"), ("member_a", "/ws/portal/acme/")])
async def test_a_bad_frame_is_answered_and_the_socket_stays(tenants: Tenants, who: str, path: str, frame: Any) -> None:
    client = await sync_to_async(logged_in)(getattr(tenants, who))
    socket, connected = await open_socket(path, client)
    assert connected
    if path == "/ws/dashboard/":
        assert await socket.receive_json_from() == {"type": "hello"}

    await socket.send_input({"type": "websocket.receive", ("bytes" if isinstance(frame, bytes) else "text"): frame})

    answer = await socket.receive_json_from(timeout=5)
    assert answer["type"] == "error"
    assert answer["detail"]
    await socket.send_json_to({"type": "ping"})
    assert await socket.receive_json_from(timeout=5) == {"type": "pong"}
    await socket.disconnect()


@pytest.mark.parametrize(("who", "path"), [("staff", "/ws/dashboard/"), ("member_a", "/ws/portal/acme/")])
async def test_logout_closes_a_socket_opened_before_it(tenants: Tenants, who: str, path: str) -> None:
    client = await sync_to_async(logged_in)(getattr(tenants, who))
    other_session = await sync_to_async(logged_in)(getattr(tenants, who))
    socket, connected = await open_socket(path, client)
    other, other_connected = await open_socket(path, other_session)
    assert connected
    assert other_connected
    if path == "/ws/dashboard/":
        await socket.receive_json_from()
        await other.receive_json_from()
    group = STAFF_GROUP if who == "staff" else org_group(tenants.org_a.pk)
    layer = get_channel_layer()
    await layer.group_send(group, EVENT)
    assert (await socket.receive_json_from(timeout=5))["type"] == "event"
    assert (await other.receive_json_from(timeout=5))["type"] == "event"

    logout = "/admin/logout/" if who == "staff" else "/accounts/logout/"
    response = await sync_to_async(client.post)(logout)
    assert response.status_code in (200, 302)

    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": LOGGED_OUT}
    # The same user's other session is not logged out, and keeps hearing events.
    await layer.group_send(group, EVENT)
    assert (await other.receive_json_from(timeout=5))["type"] == "event"
    await other.disconnect()


async def open_live(tenants: Tenants, who: str, path: str) -> tuple[WebsocketCommunicator, Client]:
    client = await sync_to_async(logged_in)(getattr(tenants, who))
    socket, connected = await open_socket(path, client)
    assert connected
    if path == "/ws/dashboard/":
        assert await socket.receive_json_from() == {"type": "hello"}
    return socket, client


SOCKETS = [("staff", "/ws/dashboard/"), ("member_a", "/ws/portal/acme/")]


@pytest.mark.parametrize("kind", ["text", "bytes"])
@pytest.mark.parametrize(("who", "path"), SOCKETS)
async def test_a_frame_over_the_limit_closes_the_socket(tenants: Tenants, who: str, path: str, kind: str) -> None:
    socket, _ = await open_live(tenants, who, path)
    frame = '{"type": "ping", "pad": "' + "é" * (settings.WEBSOCKET_MAX_FRAME_BYTES // 2) + '"}'
    assert len(frame) < settings.WEBSOCKET_MAX_FRAME_BYTES < len(frame.encode())

    await socket.send_input({"type": "websocket.receive", kind: frame.encode() if kind == "bytes" else frame})

    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": TOO_BIG}


@pytest.mark.parametrize(("who", "path"), SOCKETS)
async def test_a_frame_at_the_limit_is_read(tenants: Tenants, who: str, path: str) -> None:
    socket, _ = await open_live(tenants, who, path)
    head, tail = '{"type": "ping", "pad": "', '"}'
    frame = head + "a" * (settings.WEBSOCKET_MAX_FRAME_BYTES - len(head) - len(tail)) + tail
    assert len(frame.encode()) == settings.WEBSOCKET_MAX_FRAME_BYTES

    await socket.send_json_to(json.loads(frame))

    assert await socket.receive_json_from(timeout=5) == {"type": "pong"}
    await socket.disconnect()


@sync_to_async
def end_session(client: Client, how: str) -> None:
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    if how == "expired":
        updated = Session.objects.filter(session_key=key).update(
            expire_date=timezone.now() - datetime.timedelta(seconds=1)
        )
    else:
        updated, _ = Session.objects.filter(session_key=key).delete()
    assert updated == 1


@pytest.mark.parametrize("how", ["expired", "flushed"])
@pytest.mark.parametrize(("who", "path"), SOCKETS)
async def test_an_ended_session_closes_its_socket_at_the_next_ping(
    tenants: Tenants, who: str, path: str, how: str, settings: Any
) -> None:
    """The session is re-checked when a frame arrives, at most every WEBSOCKET_SESSION_CHECK_SECONDS."""
    settings.WEBSOCKET_SESSION_CHECK_SECONDS = 0.2
    socket, client = await open_live(tenants, who, path)
    await socket.send_json_to({"type": "ping"})
    assert await socket.receive_json_from(timeout=5) == {"type": "pong"}

    await end_session(client, how)
    await asyncio.sleep(0.3)
    await socket.send_json_to({"type": "ping"})

    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": LOGGED_OUT}


@pytest.mark.parametrize("how", ["expired", "flushed"])
@pytest.mark.parametrize(("who", "path"), SOCKETS)
async def test_an_ended_session_closes_its_socket_at_the_next_event_once_due(
    tenants: Tenants, who: str, path: str, how: str, settings: Any
) -> None:
    """A socket that never pings still re-checks its session, at most every WEBSOCKET_SESSION_CHECK_SECONDS."""
    settings.WEBSOCKET_SESSION_CHECK_SECONDS = 0.2
    socket, client = await open_live(tenants, who, path)
    other, _ = await open_live(tenants, who, path)
    group = STAFF_GROUP if who == "staff" else org_group(tenants.org_a.pk)
    layer = get_channel_layer()

    await end_session(client, how)
    await asyncio.sleep(0.3)
    await layer.group_send(group, EVENT)

    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": LOGGED_OUT}
    assert (await other.receive_json_from(timeout=5))["type"] == "event"
    await other.disconnect()


async def test_a_session_is_rechecked_at_most_once_per_interval(tenants: Tenants, settings: Any) -> None:
    settings.WEBSOCKET_SESSION_CHECK_SECONDS = 3600
    socket, client = await open_live(tenants, "staff", "/ws/dashboard/")
    layer = get_channel_layer()

    await end_session(client, "expired")
    await socket.send_json_to({"type": "ping"})
    assert await socket.receive_json_from(timeout=5) == {"type": "pong"}
    await layer.group_send(STAFF_GROUP, EVENT)
    assert (await socket.receive_json_from(timeout=5))["type"] == "event"
    await socket.disconnect()
