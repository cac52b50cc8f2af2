"""What every live socket (dashboard, portal) shares: tolerant frame reading, and closing on logout.

1. A frame over `WEBSOCKET_MAX_FRAME_BYTES` (text counted in UTF-8 bytes) closes the socket with code
   1009 ("message too big") before it is parsed.
2. A frame that is not a JSON object (binary, not UTF-8, not JSON, too deep, ...) is answered with an
   error message and otherwise ignored; the socket stays open, and nothing reaches a handler.
2. An accepted socket joins the group of its login session. Logging out (portal, admin or dashboard)
   sends that group a message that closes every socket the session opened (close code 4401), so a
   page left open after logout stops receiving events at once.
3. A session can also end without a logout: it expires, or it is flushed (deleted from the session
   store). Logout's group message never comes then, so the socket asks the session store itself: when
   a frame (the pages ping every 15 s) or an event arrives, at most once per
   `WEBSOCKET_SESSION_CHECK_SECONDS`, it loads its session; gone, expired or holding another user, the
   socket closes with 4401 as at logout. The store is shared (PostgreSQL), so this works whichever process
   ended the session, and needs no expiry timer: an expired session is noticed by the next message.
4. An unknown WebSocket path is refused at the handshake (`refuse_unknown`), like an unknown page.
"""

from __future__ import annotations

import hashlib
import logging
import time
from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.signals import user_logged_out
from django.http import HttpRequest

from common import strict

logger = logging.getLogger(__name__)

# Close code of a socket whose login session ended (the client does not reconnect with it).
LOGGED_OUT = 4401
# Close code of a socket that sent a frame over WEBSOCKET_MAX_FRAME_BYTES (RFC 6455's "message too big").
TOO_BIG = 1009
# Close code of a handshake to a path no consumer serves.
NOT_FOUND = 4404


def session_group(session_key: str) -> str:
    """The Channels group of one login session's sockets (named by a digest: the key stays secret)."""
    return "session-" + hashlib.sha256(session_key.encode()).hexdigest()[:40]


@database_sync_to_async
def session_holds(*, session_key: str, user_id: str) -> bool:
    """Whether the session store still has this session, unexpired, logged in as this user."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return bool(store.get(SESSION_KEY) == user_id)


# Messages that make a socket re-check its session when one is due: a client's frame, a group's event.
RECHECKED_ON = frozenset({"websocket.receive", "fairsched.event"})


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """A JSON socket that survives bad frames and closes when its login session ends."""

    session_group: str | None = None
    session_key: str | None = None
    session_checked_at = 0.0
    closing = False

    async def join_session(self) -> None:
        """Call after accepting: the socket now closes when its session logs out, expires or is flushed."""
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        if key:
            self.session_key = key
            self.session_checked_at = time.monotonic()
            self.session_group = session_group(key)
            await self.channel_layer.group_add(self.session_group, self.channel_name)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Before a frame or an event is handled: drop it if the socket is closing, re-check the session if due."""
        if message["type"] in RECHECKED_ON:
            if self.closing:
                return
            if self.session_key is not None and self.session_check_due() and not await self.session_alive():
                await self.fairsched_session_ended({})
                return
        await super().dispatch(message)

    def session_check_due(self) -> bool:
        return time.monotonic() - self.session_checked_at >= settings.WEBSOCKET_SESSION_CHECK_SECONDS

    async def session_alive(self) -> bool:
        assert self.session_key is not None
        user = self.scope["user"]
        alive = await session_holds(session_key=self.session_key, user_id=user._meta.pk.value_to_string(user))
        self.session_checked_at = time.monotonic()
        return alive

    async def leave_session(self) -> None:
        if self.session_group is not None and getattr(self, "channel_name", None):
            await self.channel_layer.group_discard(self.session_group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if frame_size(text_data, bytes_data) > settings.WEBSOCKET_MAX_FRAME_BYTES:
            self.closing = True
            await self.close(code=TOO_BIG)
            return
        try:
            content = strict.loads(text_data if text_data is not None else (bytes_data or b""))
        except strict.BadInput as error:
            await self.send_json({"type": "error", "detail": error.message})
            return
        if not isinstance(content, dict):
            await self.send_json({"type": "error", "detail": "a frame must be a JSON object"})
            return
        await self.receive_json(content, **kwargs)

    async def fairsched_session_ended(self, event: dict[str, Any]) -> None:
        self.closing = True
        await self.close(code=LOGGED_OUT)


def frame_size(text_data: str | None, bytes_data: bytes | None) -> int:
    """A frame's size in bytes (a text frame in UTF-8; it has at least as many bytes as characters)."""
    if text_data is None:
        return len(bytes_data or b"")
    if len(text_data) > settings.WEBSOCKET_MAX_FRAME_BYTES:
        return len(text_data)
    return len(text_data.encode("utf-8", "surrogatepass"))


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Every WebSocket path that no route serves: refused before the handshake completes."""

    async def connect(self) -> None:
        await self.close(code=NOT_FOUND)


def close_session_sockets(*, session_key: str) -> None:
    """Close every socket opened by this login session (in any web process, through the layer)."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(session_group(session_key), {"type": "fairsched.session_ended"})
    except Exception:  # a Redis blip must not fail the logout; the socket's next ping finds no session
        logger.warning("could not close the sockets of a session at logout", exc_info=True)


def on_logout(sender: object, request: HttpRequest | None, user: object, **kwargs: Any) -> None:
    """`user_logged_out` receiver: the session is still there (Django flushes it after the signal)."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        close_session_sockets(session_key=key)


def connect_signals() -> None:
    user_logged_out.connect(on_logout, dispatch_uid="common.sockets.on_logout")
