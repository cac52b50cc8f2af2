"""The portal's WebSocket: one org's members only, joined to that org's group and to the passes' group
(`PASSES_GROUP`: a replan or a dispatch ran, which moves every org's ETAs), forwarding hints.

The origin is checked by the ASGI stack and the user comes from the session. A refusal closes before
the handshake completes, the same whether the org does not exist or the user is not in it.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from common.events import PASSES_GROUP, org_group
from common.sockets import LiveConsumer
from orgs.models import Membership

# Close code for a refused socket (the client does not retry it at once).
FORBIDDEN = 4403
# Keys of an event worth forwarding: hints of what to refetch, never another org's data.
FORWARDED_KEYS = ("kind", "chart", "submitted", "at")


@database_sync_to_async
def _member_org_id(user_id: int, slug: str) -> int | None:
    return Membership.objects.filter(user_id=user_id, org__slug=slug).values_list("org_id", flat=True).first()


class OrgConsumer(LiveConsumer):
    """1. Refuse anyone but an active member of the org in the URL. 2. Join that org's group and the
    passes' group. 3. Forward each event's hint; the page refetches its part (the table, the chart).

    The client pings; each ping renews the group membership (channels-redis expires groups)."""

    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        slug = self.scope["url_route"]["kwargs"]["org_slug"]
        org_id = None
        if user is not None and user.is_authenticated and user.is_active:
            org_id = await _member_org_id(user.pk, slug)
        if org_id is None:
            await self.close(code=FORBIDDEN)
            return
        self.group = org_group(org_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.channel_layer.group_add(PASSES_GROUP, self.channel_name)
        await self.accept()
        await self.join_session()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.channel_layer.group_discard(PASSES_GROUP, self.channel_name)
        await self.leave_session()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if self.group is not None and isinstance(content, dict) and content.get("type") == "ping":
            await self.channel_layer.group_add(self.group, self.channel_name)
            await self.channel_layer.group_add(PASSES_GROUP, self.channel_name)
            await self.send_json({"type": "pong"})

    async def fairsched_event(self, event: dict[str, Any]) -> None:
        message = event.get("message") or {}
        await self.send_json({"type": "event", **{key: message[key] for key in FORWARDED_KEYS if key in message}})
