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


def test_a_cancel_sent_by_charts_reaches_temporal_through_the_task_of_that_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """charts.services sends the cancel by name (it cannot import scheduling); the name is this task's,
    and the task asks Temporal to cancel that workflow."""
    from charts import services as chart_services
    from fairsched.celery import app

    sent: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args: sent.append((name, args)))
    chart_services._cancel_workflow("chart-1-1")
    assert sent == [(chart_services.CANCEL_WORKFLOW_TASK, ["chart-1-1"])]

    asked: list[str] = []
    monkeypatch.setattr(tasks, "temporal_cancel_workflow", asked.append)
    app.tasks[chart_services.CANCEL_WORKFLOW_TASK].apply(args=["chart-1-1"]).get()
    assert asked == ["chart-1-1"]
