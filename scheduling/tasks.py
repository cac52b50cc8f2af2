"""Celery tasks: thin wrappers that call the scheduling services."""

from __future__ import annotations

from celery import shared_task


def replan_soon() -> None:
    """Queue a replan at once; bursts of changes are coalesced by the replan task's own lock."""
    replan.apply_async()


@shared_task(name="scheduling.tasks.replan")
def replan() -> None:
    """Placeholder until the live loop lands."""
