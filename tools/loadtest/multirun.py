"""`python -m tools.loadtest.multirun` (`make multirun`): the hostile load on several of every
process, with the faults, and the dispatcher killed mid-pass again and again.

Steps:
1. Run the load (`tools.loadtest.runner`, on its own embedded PostgreSQL, Redis and Temporal):
   two Celery workers each with its own beat, two Temporal workers, two web processes (the
   Procfile's command), the usual faults (a Celery worker killed mid-dispatch, Temporal, Redis and
   PostgreSQL restarted), and `--leader-kills` kills -9 of whichever Celery process holds the
   dispatcher's lock mid-pass.
2. From its event log: lost (a submitted chart without exactly one terminal state), run twice (a
   chart with more than one completed run in Temporal), the budget's peak replayed from the
   transitions, the failover time of every leader kill (until another process holds the lock), and
   the chart status read's throughput through one and through two web processes (50 callers back to
   back, rate limits on).
3. Print the figures and write them to `reports/multirun.md`; exit 1 if anything was lost, run twice
   or over budget, or a failover never happened.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fairsched.devservices import REPO_ROOT
from tools.loadtest import metrics
from tools.loadtest.document import Document, markdown

REPORTS = REPO_ROOT / "reports"


def summary(log: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The lines of the report and whether the run passed."""
    integrity = metrics.integrity_figures(log)
    budget = metrics.budget_figures(log)
    lost = integrity.lost
    kills = log.get("leader_kills", [])
    failovers = [kill["failover"] for kill in kills if kill["failover"] is not None]
    meta = log["meta"]
    lines = [
        f"processes: {meta.get('web_processes', 0)} web, {meta.get('celery_workers', 1)} Celery workers each with "
        f"beat, {meta['temporal_workers']} Temporal workers; {meta['planned_charts']} charts over "
        f"{meta['seconds']:g} s, budget {budget.budget}",
        f"faults: {', '.join(fault['kind'] for fault in log['faults']) or 'none'}",
        f"lost: {lost}",
        f"run twice: {len(integrity.run_twice)}",
        f"disagreements with Temporal: {len(integrity.disagreements)}",
        f"budget peak: {budget.peak} of {budget.budget}" + (" - EXCEEDED" if budget.exceeded_at else ""),
        f"leader kills: {len(kills)} ({sum(1 for kill in kills if kill['holder'])} caught mid-pass)",
    ]
    for kill in kills:
        failover = "never" if kill["failover"] is None else f"{kill['failover'] * 1000:.0f} ms"
        lines.append(f"  at {kill['at']:.1f} s killed {kill['holder']}; failover {failover}")
    if failovers:
        lines.append(
            f"leader failover: median {1000 * sorted(failovers)[len(failovers) // 2]:.0f} ms, "
            f"max {1000 * max(failovers):.0f} ms"
        )
    for run in log.get("api", []):
        lines.append(
            f"chart status through {run['web_processes']} web process(es), 50 callers back to back: "
            f"{run['per_second']:.0f} req/s, p50 {run['p50_ms']:.0f} ms, p95 {run['p95_ms']:.0f} ms, "
            f"{run['errors']} errors"
        )
    caught = [kill for kill in kills if kill["holder"]]
    passed = (
        lost == 0
        and not integrity.run_twice
        and not budget.exceeded_at
        and all(kill["failover"] is not None for kill in caught)
    )
    return lines, passed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The hostile load on several of every process.")
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("MULTIRUN_SECONDS", 120)))
    parser.add_argument("--leader-kills", type=int, default=5)
    parser.add_argument("--faults", default=None, help="passed to the runner (default: all)")
    parser.add_argument("--log", type=Path, help="an existing event log (skips the run)")
    parser.add_argument("--out", type=Path, default=REPORTS / "multirun")
    args = parser.parse_args(argv)
    log_path = args.log
    if log_path is None:
        log_path = args.out / "events.json"
        run = [
            sys.executable, "-m", "tools.loadtest.runner", "--seconds", str(args.seconds), "--out", str(log_path),
            "--celery-workers", "2", "--temporal-workers", "2", "--web", "2", "--leader-kills", str(args.leader_kills),
        ]  # fmt: skip
        if args.faults is not None:
            run += ["--faults", args.faults]
        subprocess.run(run, cwd=REPO_ROOT, check=True)
    lines, passed = summary(json.loads(log_path.read_text()))
    lines.append("PASSED" if passed else "FAILED")
    args.out.mkdir(parents=True, exist_ok=True)
    command = f"python -m tools.loadtest.multirun --seconds {args.seconds:g} --leader-kills {args.leader_kills}"
    report = Document("Multi-instance run", intro=[f"`{command}`", "\n".join(f"- {line}" for line in lines)])
    (args.out / "multirun.md").write_text(markdown(report))
    print("\n".join(lines), flush=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
