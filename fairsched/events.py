"""Announcing changes after commit: a debounced replan and a small message to the live pages.

Services call `changed()` inside their transaction; nothing leaves the process unless the transaction
commits (Zulip's `send_event_on_commit`), so a rolled-back change never announces itself.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

logger = logging.getLogger(__name__)

STAFF_GROUP = "staff"


def org_group(org_id: int) -> str:
    """The Channels group of one org's portal pages; customers only ever join their own."""
    return f"org-{org_id}"


def changed(*, kind: str, org_id: int | None = None, replan: bool = True, **data: Any) -> None:
    """After commit: tell the live pages that `kind` changed, and ask for a replan if the plan moves."""

    def announce() -> None:
        message = {"kind": kind, "org": org_id, **data}
        broadcast(STAFF_GROUP, message)
        if org_id is not None:
            broadcast(org_group(org_id), message)
        if replan:
            request_replan()

    transaction.on_commit(announce)


def broadcast(group: str, message: dict[str, Any]) -> None:
    """Send a 'tell clients what to refetch' message to a Channels group; a Redis blip only logs."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, {"type": "fairsched.event", "message": message})
    except Exception:  # the live pages resync on their next message; a lost one must not fail a write
        logger.warning("broadcast to %s failed", group, exc_info=True)


def request_replan() -> None:
    """Queue a debounced replan (the task itself coalesces bursts; see scheduling.tasks)."""
    from scheduling.tasks import replan_soon

    try:
        replan_soon()
    except Exception:  # beat replans every few seconds anyway
        logger.warning("could not queue a replan", exc_info=True)
