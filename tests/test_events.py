"""Broadcasts leave the process from a sender thread: the caller never waits on Redis, and the
messages arrive in the order they were made (through the real Redis channel layer)."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from common import events

WAIT_SECONDS = 30


def test_broadcasts_reach_the_group_in_order() -> None:
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    group = f"test-events-{threading.get_ident()}"
    async_to_sync(layer.group_add)(group, channel)
    try:
        for n in range(5):
            events.broadcast(group, {"kind": "chart", "n": n})

        async def receive_all() -> list[Any]:
            return [(await asyncio.wait_for(layer.receive(channel), WAIT_SECONDS))["message"]["n"] for _ in range(5)]

        assert async_to_sync(receive_all)() == [0, 1, 2, 3, 4]
    finally:
        async_to_sync(layer.group_discard)(group, channel)


def test_the_caller_does_not_wait_for_the_send(monkeypatch: pytest.MonkeyPatch) -> None:
    """A send that cannot finish (Redis stalled) does not hold the caller; what follows it is sent
    once it finishes, in order."""
    layer = get_channel_layer()
    release = threading.Event()
    sent: list[str] = []

    async def stalled_send(group: str, message: dict[str, Any]) -> None:
        if group == "stalled":
            await asyncio.get_running_loop().run_in_executor(None, release.wait, WAIT_SECONDS)
        sent.append(group)

    monkeypatch.setattr(layer, "group_send", stalled_send)
    events.broadcast("stalled", {"kind": "chart"})
    events.broadcast("after", {"kind": "chart"})
    assert sent == []  # both calls returned while the first send is still stalled
    release.set()
    events._sender.flush()
    assert sent == ["stalled", "after"]


def test_replan_requests_queued_together_are_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Submissions that commit while the sender is busy ask for one replan, after their broadcasts."""
    layer = get_channel_layer()
    release = threading.Event()
    done: list[str] = []

    async def stalled_send(group: str, message: dict[str, Any]) -> None:
        if group == "stalled":
            await asyncio.get_running_loop().run_in_executor(None, release.wait, WAIT_SECONDS)
        done.append(group)

    monkeypatch.setattr(layer, "group_send", stalled_send)
    monkeypatch.setattr(events, "replan_soon", lambda: done.append("replan"))
    events.broadcast("stalled", {"kind": "charts"})
    for n in range(3):
        events.broadcast(f"org-{n}", {"kind": "charts"})
        events.request_replan()
    assert done == []
    release.set()
    events._sender.flush()
    # The first batch is the stalled broadcast alone; the rest queued behind it are one batch.
    assert done == ["stalled", "org-0", "org-1", "org-2", "replan"]


def test_replan_soon_sends_the_replan_task_by_name_once_until_it_begins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request goes to Celery by the task's name (this module does not import scheduling); a second
    request while one is pending rides along, and the task starting clears the flag."""
    from django.core.cache import cache

    from fairsched.celery import app
    from scheduling import tasks

    sent: list[str] = []
    monkeypatch.setattr(app, "send_task", lambda name, *args, **kwargs: sent.append(name))
    monkeypatch.setattr(tasks, "plan_refresh", lambda: None)
    monkeypatch.setattr(tasks, "dispatch_run", lambda: None)
    cache.delete(events.REPLAN_PENDING_KEY)
    events.replan_soon()
    events.replan_soon()
    assert sent == [events.REPLAN_TASK]
    assert app.tasks[events.REPLAN_TASK] == tasks.replan
    tasks.replan()
    events.replan_soon()
    assert sent == [events.REPLAN_TASK, events.REPLAN_TASK]
    cache.delete(events.REPLAN_PENDING_KEY)


def test_a_batch_merges_broadcasts_that_say_the_same_to_a_group_summing_what_was_submitted() -> None:
    charts = {"kind": "charts", "org": 1}
    batch: list[events.Announcement] = [
        ("staff", {**charts, "submitted": 1}),
        events.REPLAN,
        ("org-1", {**charts, "submitted": 1}),
        ("staff", {"kind": "chart", "org": 1, "chart": 7}),
        ("staff", {**charts, "submitted": 2}),
        ("org-1", {**charts, "submitted": 3}),
        ("staff", {"kind": "chart", "org": 1, "chart": 8}),
        ("staff", {"kind": "chart", "org": 1, "chart": 7}),
        events.REPLAN,
    ]
    assert events.merged(batch) == [
        ("staff", {**charts, "submitted": 3}),
        events.REPLAN,
        ("org-1", {**charts, "submitted": 4}),
        ("staff", {"kind": "chart", "org": 1, "chart": 7}),
        ("staff", {"kind": "chart", "org": 1, "chart": 8}),
        events.REPLAN,
    ]


def test_a_lone_announcement_goes_at_once_and_a_burst_after_it_waits_to_go_as_one_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sender's clock is the test's: the first broadcast is sent without a wait; the two made
    just after it wait out the gathering time, then go together, merged."""
    layer = get_channel_layer()
    sent: list[tuple[str, dict[str, Any]]] = []
    waits: list[float] = []
    burst_queued = threading.Event()

    async def record(group: str, message: dict[str, Any]) -> None:
        sent.append((group, message["message"]))

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if seconds > 0:
            assert burst_queued.wait(WAIT_SECONDS)

    monkeypatch.setattr(layer, "group_send", record)
    monkeypatch.setattr(events, "time", SimpleNamespace(monotonic=lambda: 1000.0, sleep=sleep))
    events._sender.flush()  # a thread of its own, on the test's clock
    events.broadcast("org-1", {"kind": "charts", "org": 1, "submitted": 1})
    deadline = time.monotonic() + WAIT_SECONDS
    while not sent and time.monotonic() < deadline:
        time.sleep(0.01)
    events.broadcast("org-1", {"kind": "charts", "org": 1, "submitted": 1})
    events.broadcast("org-1", {"kind": "charts", "org": 1, "submitted": 2})
    burst_queued.set()
    events._sender.flush()
    assert waits == [0.0, pytest.approx(events._Sender.GATHER_SECONDS)]
    assert sent == [
        ("org-1", {"kind": "charts", "org": 1, "submitted": 1}),
        ("org-1", {"kind": "charts", "org": 1, "submitted": 3}),
    ]
