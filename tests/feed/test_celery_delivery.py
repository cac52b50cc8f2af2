"""Webhooks delivered by a real Celery worker with beat (prefork children, Redis broker) to a receiver on
127.0.0.1 that fails the first tries; the worker is killed (SIGKILL, its whole group) while a retry's
POST is in flight. A new worker delivers everything: no event lost, each in order, and every repeat
carries the key of the delivery it repeats."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from charts import services as chart_services
from common.actors import Actor
from feed import services
from feed.models import WebhookDelivery
from tests.celery_workers import celery_workers
from tests.conftest import Tenants
from tests.feed.test_webhooks import receiver, settle

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def celery_worker(temporal_settings: Any, tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    with celery_workers(
        tmp_path,
        TEMPORAL_ADDRESS=temporal_settings.TEMPORAL_ADDRESS,
        FAIRSCHED_WEBHOOK_ALLOW_HTTP="1",
        FAIRSCHED_WEBHOOK_ALLOW_PRIVATE="1",
        FAIRSCHED_WEBHOOK_FIRST_RETRY="0.2",
        FAIRSCHED_WEBHOOK_TIMEOUT="10",
    ) as start:
        yield start


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not reached within {timeout} s: {what}"
        time.sleep(0.1)


def test_a_worker_killed_mid_retry_loses_nothing_and_repeats_only_with_the_key(
    tenants: Tenants, celery_worker: Callable[[], subprocess.Popen[bytes]], settings: Any
) -> None:
    settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP = settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = True
    in_flight = threading.Event()
    with receiver() as (url, received):
        # Two failures, then a retry that hangs (the worker is killed while it waits), then success.
        received.answers = [(500, b"no", {}), (500, b"no", {})]
        endpoint, _ = services.webhook_endpoint_create(
            org=tenants.org_a, url=url, event_types=["chart.cancelled"], actor=Actor("user:stella", staff=True)
        )
        for n in range(8):
            chart, _ = chart_services.chart_submit(
                org=tenants.org_a, workflow="render", external_id=f"a-{n}", actor=Actor("user:alice", staff=True)
            )
            chart_services.chart_cancel(chart=chart, actor=Actor("user:alice", staff=True))
        settle()
        received.hang = (3, in_flight)

        worker = celery_worker()
        assert in_flight.wait(90), "the third try never came"
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
        celery_worker()
        wait_for(
            lambda: WebhookDelivery.objects.filter(endpoint=endpoint, state="delivered").count() == 8,
            90,
            "every delivery delivered",
        )

    keys = [headers["idempotency-key"] for headers, _ in received.requests]
    first_seen = list(dict.fromkeys(keys))
    expected = list(
        WebhookDelivery.objects.filter(endpoint=endpoint).order_by("id").values_list("idempotency_key", flat=True)
    )
    assert first_seen == expected  # all 8, in the feed's order
    bodies: dict[str, set[bytes]] = {}
    for headers, body in received.requests:
        bodies.setdefault(headers["idempotency-key"], set()).add(body)
    assert all(len(b) == 1 for b in bodies.values())  # a repeat is the same event under the same key
    assert keys[:3] == [expected[0]] * 3  # the first event: two failures, the try killed in flight
    assert len(keys) > 8
