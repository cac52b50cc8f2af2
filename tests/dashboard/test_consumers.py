"""The dashboard's WebSocket over the full ASGI stack (origin check, session auth) and the real Redis
channel layer: only staff get in, and a service's change reaches them."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections
from django.test import Client

from common.actors import Actor
from common.events import STAFF_GROUP
from fairsched.asgi import application
from orgs import services as org_services
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture(autouse=True)
def no_persistent_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker threads close their connections after each call, so the test database can be dropped."""
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)


@database_sync_to_async
def session_header(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return b"cookie", f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def communicator(*headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, "/ws/dashboard/", headers=list(headers))


async def test_anonymous_is_refused(tenants: Tenants) -> None:
    socket = communicator(ORIGIN)
    connected, code = await socket.connect()
    assert not connected
    assert code == 4403


async def test_a_customer_is_refused(tenants: Tenants) -> None:
    socket = communicator(ORIGIN, await session_header(tenants.member_a))
    connected, code = await socket.connect()
    assert not connected
    assert code == 4403


async def test_a_foreign_origin_is_refused(tenants: Tenants) -> None:
    socket = communicator((b"origin", b"http://evil.example"), await session_header(tenants.staff))
    connected, _ = await socket.connect()
    assert not connected


async def test_staff_receive_a_lever_change_from_the_staff_group(tenants: Tenants) -> None:
    socket = communicator(ORIGIN, await session_header(tenants.staff))
    connected, _ = await socket.connect()
    assert connected
    assert await socket.receive_json_from() == {"type": "hello"}

    # A real service: its change is announced after commit through the Redis layer.
    await database_sync_to_async(org_services.org_hold)(org=tenants.org_a, actor=Actor("user:stella", staff=True))
    message = await socket.receive_json_from(timeout=5)
    assert message == {"type": "event", "kind": "org", "org": tenants.org_a.pk}
    await socket.disconnect()


async def test_ping_renews_the_membership_and_answers(tenants: Tenants) -> None:
    socket = communicator(ORIGIN, await session_header(tenants.staff))
    assert (await socket.connect())[0]
    await socket.receive_json_from()
    await socket.send_json_to({"type": "ping"})
    assert await socket.receive_json_from() == {"type": "pong"}
    layer = get_channel_layer()
    assert layer is not None
    await layer.group_send(STAFF_GROUP, {"type": "fairsched.event", "message": {"kind": "plan", "queued": 3}})
    assert await socket.receive_json_from(timeout=5) == {"type": "event", "kind": "plan", "queued": 3}
    await socket.disconnect()
