"""The dashboard's WebSocket: staff only, joined to the staff group, forwarding 'what to refetch'.

The origin is checked by the ASGI stack (`AllowedHostsOriginValidator`) and the user comes from the
session (`AuthMiddlewareStack`). Messages are small hints, never data: a client refetches what a hint
names, and everything after a reconnect, so a hint lost in a Redis blip costs at most a stale second.
"""

from __future__ import annotations

from typing import Any

from common.events import STAFF_GROUP
from common.sockets import LiveConsumer

# Close codes a client should not retry at once (4403: not staff).
FORBIDDEN = 4403


class DashboardConsumer(LiveConsumer):
    """1. Refuse anyone but active staff. 2. Join the staff group. 3. Forward each event's hint.

    The client pings; each ping renews the group membership (channels-redis expires groups, and a
    Redis restart forgets them), so a long-lived socket cannot silently fall out of the group.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active or not user.is_staff:
            await self.close(code=FORBIDDEN)
            return
        await self.channel_layer.group_add(STAFF_GROUP, self.channel_name)
        await self.accept()
        await self.join_session()
        await self.send_json({"type": "hello"})

    async def disconnect(self, code: int) -> None:
        if self.channel_layer is not None and getattr(self, "channel_name", None):
            await self.channel_layer.group_discard(STAFF_GROUP, self.channel_name)
        await self.leave_session()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.channel_layer.group_add(STAFF_GROUP, self.channel_name)
            await self.send_json({"type": "pong"})

    async def fairsched_event(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        await self.send_json({**(message if isinstance(message, dict) else {}), "type": "event"})
