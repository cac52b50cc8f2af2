"""The Celery tasks' order of passes: a settled completion dispatches into the freed budget before
any replan (the figure of bench/bench_latency.py; the real loop runs in test_celery_loop.py)."""

from __future__ import annotations

import pytest

from scheduling import tasks


class Calls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, still_running: bool = False) -> None:
        self.made: list[str] = []
        monkeypatch.setattr(tasks, "reconcile_one", lambda chart_id: self.record(f"settle {chart_id}", still_running))
        monkeypatch.setattr(tasks, "dispatch_run", lambda: self.record("dispatch"))
        monkeypatch.setattr(tasks, "plan_refresh", lambda: self.record("replan"))
        monkeypatch.setattr(tasks, "replan_soon", lambda: self.record("replan soon"))

    def record(self, call: str, value: object = None) -> object:
        self.made.append(call)
        return value


def test_a_completion_hint_dispatches_first_then_asks_for_a_replan(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch)
    tasks.reconcile_chart.apply(args=[7]).get()
    assert calls.made == ["settle 7", "dispatch", "replan soon"]


def test_a_hint_for_a_workflow_still_closing_looks_again_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch, still_running=True)
    result = tasks.reconcile_chart.apply(args=[7])
    assert calls.made == ["settle 7"] * (tasks.HINT_RETRIES + 1)
    assert result.state == "FAILURE"  # retries spent: the periodic reconcile takes it from there
    assert tasks.HINT_RETRIES * tasks.HINT_RETRY_SECONDS >= 3


def test_a_reconcile_that_finished_runs_dispatches_before_it_replans(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls(monkeypatch)
    monkeypatch.setattr(tasks, "reconcile_run", lambda: type("Result", (), {"finished": [1], "marked_running": []}))
    tasks.reconcile.apply().get()
    assert calls.made == ["dispatch", "replan", "dispatch"]
