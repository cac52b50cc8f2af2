"""Replan pass on PostgreSQL: load + plan + persist, with 10k and 100k queued charts.

Run: `.venv/bin/python bench/bench_replan.py [--sizes 10000,100000]`. It uses its own database
(`fairsched_bench` on the server of DATABASE_URL, created and dropped here), 500 orgs, budget 200.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from backlog import run_at_sizes, seed_backlog, use_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCH_DB = "fairsched_bench_replan"
use_database(BENCH_DB)


def measure(size: int) -> None:
    from scheduling import core
    from scheduling.replan import plan_refresh
    from scheduling.snapshot import load_snapshot

    seed_backlog(size)
    plan_refresh()  # warm: the first pass writes every position
    started = time.perf_counter()
    snapshot = load_snapshot()
    loaded = time.perf_counter()
    core.plan(snapshot.scenario)
    planned = time.perf_counter()
    total_started = time.perf_counter()
    result = plan_refresh()
    total = time.perf_counter() - total_started
    print(
        f"{size:>8,} queued: replan pass {total:6.2f} s (load {loaded - started:.2f} s, core plan "
        f"{planned - loaded:.2f} s; {result.ordered:,} ordered)"
    )


def main() -> None:
    run_at_sizes(BENCH_DB, measure, description=__doc__)


if __name__ == "__main__":
    main()
