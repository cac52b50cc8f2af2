"""The portal's WebSocket over the real ASGI stack and the real Redis channel layer: only an org's
members join its group, and they hear their own org's events only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from common.actors import Actor
from common.events import STAFF_GROUP, org_group
from fairsched.asgi import application
from tests.conftest import Tenants

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_channel_layer")]


@pytest.fixture(autouse=True)
async def close_consumer_connections() -> AsyncIterator[None]:
    """The consumer reads the database from Channels' worker thread; close that thread's connection
    after each test so the test database can be dropped at the end."""
    yield
    await sync_to_async(connections.close_all)()


def session_headers(user: Any) -> list[tuple[bytes, bytes]]:
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


async def connect(user: Any, slug: str) -> tuple[WebsocketCommunicator, bool]:
    headers = await sync_to_async(session_headers)(user)
    communicator = WebsocketCommunicator(application, f"/ws/portal/{slug}/", headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    return communicator, connected


@pytest.mark.parametrize(
    ("who", "slug"),
    [
        ("member_b", "acme"),
        ("outsider", "acme"),
        ("staff", "acme"),
        (None, "acme"),
        ("member_a", "beta"),
        ("member_a", "no-such-org"),
    ],
)
async def test_refused_unless_a_member_of_that_org(tenants: Tenants, who: str | None, slug: str) -> None:
    user = getattr(tenants, who) if who else None

    communicator, connected = await connect(user, slug)

    assert not connected
    await communicator.disconnect()


async def test_member_hears_own_org_only(tenants: Tenants) -> None:
    layer = get_channel_layer()
    alice, connected = await connect(tenants.member_a, "acme")
    assert connected

    await layer.group_send(org_group(tenants.org_b.pk), {"type": "fairsched.event", "message": {"kind": "charts"}})
    await layer.group_send(STAFF_GROUP, {"type": "fairsched.event", "message": {"kind": "config"}})
    assert await alice.receive_nothing(timeout=0.5)

    await layer.group_send(
        org_group(tenants.org_a.pk),
        {"type": "fairsched.event", "message": {"kind": "charts", "org": tenants.org_a.pk, "submitted": 3, "x": 1}},
    )
    assert await alice.receive_json_from(timeout=5) == {"type": "event", "kind": "charts", "submitted": 3}
    await alice.disconnect()


async def test_ping_renews_and_answers(tenants: Tenants) -> None:
    alice, connected = await connect(tenants.member_a, "acme")
    assert connected

    await alice.send_json_to({"type": "ping"})

    assert await alice.receive_json_from(timeout=5) == {"type": "pong"}
    await alice.disconnect()


async def test_a_submission_reaches_its_org_after_commit(tenants: Tenants, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: a chart submitted through the service is announced to its org's socket only."""
    from charts.services import chart_submit
    from common import events

    monkeypatch.setattr(events, "request_replan", lambda: None)
    alice, _ = await connect(tenants.member_a, "acme")
    bob, _ = await connect(tenants.member_b, "beta")

    await sync_to_async(chart_submit)(
        org=tenants.org_a, workflow="render", external_id="ws-1", actor=Actor("user:alice", staff=True)
    )

    message = await alice.receive_json_from(timeout=5)
    assert message["type"] == "event"
    assert message["kind"] == "charts"
    assert await bob.receive_nothing(timeout=0.5)
    await alice.disconnect()
    await bob.disconnect()


async def test_every_member_hears_that_a_pass_ran(tenants: Tenants) -> None:
    """A replan or a dispatch moves every org's ETAs: both orgs' pages hear the pass, and nothing but its kind."""
    from common.events import pass_done

    alice, _ = await connect(tenants.member_a, "acme")
    bob, _ = await connect(tenants.member_b, "beta")

    await sync_to_async(pass_done)(kind="plan")

    assert await alice.receive_json_from(timeout=5) == {"type": "event", "kind": "plan"}
    assert await bob.receive_json_from(timeout=5) == {"type": "event", "kind": "plan"}
    await alice.disconnect()
    await bob.disconnect()
