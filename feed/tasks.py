"""Celery tasks of the webhooks: beat's tick collects the feed's new events into deliveries and starts
a sender for every endpoint with a delivery due (`feed.services` keeps one sender per endpoint).

The tick is the safety net: each worker's listener (`feed.listener`) does the same at each commit."""

from __future__ import annotations

from celery import shared_task

from feed import services

TICK_TASK = "feed.tasks.webhooks_tick"


@shared_task(name=TICK_TASK, ignore_result=True)
def webhooks_tick() -> None:
    """1. Collect each active endpoint's new events. 2. Send for each endpoint with a delivery due."""
    services.webhook_deliveries_collect_all()
    for endpoint_id in services.webhook_endpoints_due():
        webhook_send.delay(endpoint_id)


@shared_task(name="feed.tasks.webhook_send", ignore_result=True)
def webhook_send(endpoint_id: int) -> None:
    services.webhook_endpoint_send(endpoint_id=endpoint_id)
