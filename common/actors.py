"""How the event log and histories name who did something."""

from __future__ import annotations

from typing import Any

DISPATCHER = "system:dispatcher"
RECONCILER = "system:reconciler"


def actor_for(user: Any) -> str:
    """A person is 'user:<username>'; an anonymous caller never reaches a service."""
    return f"user:{user.get_username()}"
