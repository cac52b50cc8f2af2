"""What every live socket (dashboard, portal) shares: tolerant frame reading, and closing on logout.

1. A frame that is not a JSON object (binary, not UTF-8, not JSON, too deep, ...) is answered with an
   error message and otherwise ignored; the socket stays open, and nothing reaches a handler.
2. An accepted socket joins the group of its login session. Logging out (portal, admin or dashboard)
   sends that group a message that closes every socket the session opened (close code 4401), so a
   page left open after logout stops receiving events at once.
3. An unknown WebSocket path is refused at the handshake (`refuse_unknown`), like an unknown page.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.contrib.auth.signals import user_logged_out
from django.http import HttpRequest

from common import strict

logger = logging.getLogger(__name__)

# Close code of a socket whose login session ended (the client does not reconnect with it).
LOGGED_OUT = 4401
# Close code of a handshake to a path no consumer serves.
NOT_FOUND = 4404


def session_group(session_key: str) -> str:
    """The Channels group of one login session's sockets (named by a digest: the key stays secret)."""
    return "session-" + hashlib.sha256(session_key.encode()).hexdigest()[:40]


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """A JSON socket that survives bad frames and closes when its login session ends."""

    session_group: str | None = None

    async def join_session(self) -> None:
        """Call after accepting: the socket now closes when its session logs out."""
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        if key:
            self.session_group = session_group(key)
            await self.channel_layer.group_add(self.session_group, self.channel_name)

    async def leave_session(self) -> None:
        if self.session_group is not None and getattr(self, "channel_name", None):
            await self.channel_layer.group_discard(self.session_group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
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
        await self.close(code=LOGGED_OUT)


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
