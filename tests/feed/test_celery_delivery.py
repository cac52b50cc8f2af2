"""Webhooks delivered by a real Celery worker with beat (prefork children, Redis broker) to a receiver on
127.0.0.1 that fails the first tries; the worker is killed (SIGKILL, its whole group) while a retry's
POST is in flight. A new worker delivers everything: no event lost, each in order, and every repeat
carries the key of the delivery it repeats."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from charts import services as chart_services
from common.actors import Actor
from feed import listener, services
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


@pytest.fixture
def worker_without_tick(temporal_settings: Any, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A worker whose webhooks' tick is an hour away: a delivery can only come from its listener."""
    with celery_workers(
        tmp_path,
        TEMPORAL_ADDRESS=temporal_settings.TEMPORAL_ADDRESS,
        FAIRSCHED_WEBHOOK_ALLOW_HTTP="1",
        FAIRSCHED_WEBHOOK_ALLOW_PRIVATE="1",
        FAIRSCHED_WEBHOOK_TICK="3600",
    ) as start:
        worker = start()
        wait_for(listening, 90, "the worker's feed listener")
        yield worker


def listening() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
            [f"LISTEN {listener.CHANNEL}"],
        )
        return bool(cursor.fetchone()[0])


def received_count(received: Any, count: int) -> Callable[[], bool]:
    return lambda: len(received.requests) == count


def cancel_one(tenants: Tenants, external_id: str) -> None:
    chart, _ = chart_services.chart_submit(
        org=tenants.org_a, workflow="render", external_id=external_id, actor=Actor("user:alice", staff=True)
    )
    chart_services.chart_cancel(chart=chart, actor=Actor("user:alice", staff=True))


def test_a_commit_wakes_its_delivery_without_the_tick(
    tenants: Tenants, worker_without_tick: subprocess.Popen[bytes], settings: Any
) -> None:
    settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP = settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = True
    with receiver() as (url, received):
        services.webhook_endpoint_create(
            org=tenants.org_a, url=url, event_types=["chart.cancelled"], actor=Actor("user:s", staff=True)
        )
        for n in range(3):
            committed = time.monotonic()
            cancel_one(tenants, f"w-{n}")
            wait_for(received_count(received, n + 1), 10, f"delivery {n}")
            assert time.monotonic() - committed < 5  # the tick is an hour away
    assert [json.loads(body)["data"]["external_id"] for _, body in received.requests] == ["w-0", "w-1", "w-2"]


def test_a_commit_behind_an_older_open_transaction_is_delivered_when_that_one_ends(
    tenants: Tenants, worker_without_tick: subprocess.Popen[bytes], settings: Any
) -> None:
    """The hint comes at the event's commit, while an older transaction still holds the feed's horizon
    back; that one writes no feed row, so no hint comes when it ends: the listener must look again."""
    settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP = settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = True
    with receiver() as (url, received):
        services.webhook_endpoint_create(
            org=tenants.org_a, url=url, event_types=["chart.cancelled"], actor=Actor("user:s", staff=True)
        )
        with psycopg.connect(**connection.get_connection_params()) as older:
            older.execute("SELECT pg_current_xact_id()")  # an open transaction with an id, older than the event's
            cancel_one(tenants, "held")
            time.sleep(0.5)
            assert received.requests == []  # the horizon has not passed the event
            older.commit()
            ended = time.monotonic()
        wait_for(lambda: len(received.requests) == 1, 10, "the held delivery")
        assert time.monotonic() - ended < listener.PATIENCE_SECONDS
