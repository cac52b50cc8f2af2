"""Event logs (the runner's `events.json`) for the tests: small synthetic ones, for the figures and
the report, and real ones from a shortened run of the runner."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from fairsched.devservices import REPO_ROOT


def run_load(args: list[str], out: Path, *, timeout: float) -> dict[str, Any]:
    """Run `python -m tools.loadtest.runner ARGS --drain-timeout 90 --out OUT` and return its log. On a
    timeout the runner gets SIGTERM, which it handles like Ctrl-C: it stops its children and services
    before leaving."""
    runner = subprocess.Popen(
        [sys.executable, "-m", "tools.loadtest.runner", *args, "--drain-timeout", "90", "--out", str(out)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _, stderr = runner.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        runner.send_signal(signal.SIGTERM)
        runner.communicate(timeout=60)
        raise
    assert runner.returncode == 0, stderr[-4000:]
    log: dict[str, Any] = json.loads(out.read_text())
    return log


def chart(
    chart_id: int, org: str, submitted: float, *, state: str = "succeeded", finished: float | None = None,
    runs: list[tuple[str, float | None, float | None]] | None = None, cost: int = 1,
    eta_enqueue: dict[str, Any] | None = None, eta_start: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    runs = runs if runs is not None else [("completed", submitted, finished)]
    return {
        "id": chart_id,
        "org": org,
        "external_id": f"{org}-{chart_id}",
        "workflow": "standard",
        "cost": cost,
        "planned_duration": 1.0,
        "planned_submit": submitted,
        "submitted": submitted,
        "state": state,
        "attempt": len(runs),
        "started": runs[-1][1] if runs else None,
        "finished": finished,
        "eta_enqueue": eta_enqueue,
        "eta_start": eta_start,
        "runs": [
            {"attempt": i + 1, "workflow_id": f"chart-{chart_id}-a{i + 1}", "status": s, "start": a, "close": b}
            for i, (s, a, b) in enumerate(runs)
        ],
    }


def lifecycle(chart_id: int, submitted: float, start: float, finish: float, end: str = "succeeded") -> list[list[Any]]:
    return [
        [chart_id, submitted, "", "queued"],
        [chart_id, start, "queued", "dispatching"],
        [chart_id, start + 0.01, "dispatching", "running"],
        [chart_id, finish, "running", end],
    ]


def log_of(charts: list[dict[str, Any]], transitions: list[list[Any]], **meta: Any) -> dict[str, Any]:
    return {
        "meta": {"budget": 2, "ended": 20.0, "default_duration": 2.0, "planned_charts": len(charts), **meta},
        "orgs": [
            {"slug": "big", "kind": "backfill", "workflow": "standard", "weight": 1, "held_until": None},
            {"slug": "small", "kind": "small", "workflow": "standard", "weight": 1, "held_until": None},
        ],
        "holds": [],
        "pauses": [],
        "faults": [],
        "charts": charts,
        "transitions": sorted(transitions, key=lambda t: t[1]),
        "temporal_unknown_workflows": [],
    }
