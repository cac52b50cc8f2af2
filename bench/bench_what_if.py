"""The what-if preview on PostgreSQL: snapshot + two core plans + per-chart moves, 10k and 100k queued.

Run: `.venv/bin/python bench/bench_what_if.py [--sizes 10000,100000]`. It uses its own database
(`fairsched_bench_what_if` on the server of DATABASE_URL, created and dropped here) and the backlog of
`bench/backlog.py` (500 orgs). Each line: the min and median of five previews of one change set, wall
and CPU seconds of this process (the database's own work is in the wall time only), after one preview
that loads the core's compiled replay (as a web process's first large what-if does).

Figures (issue 28, 100k queued, weight change; 2-core machine shared with six other sessions, load 8-10,
so the CPU seconds are the figure to compare): before, wall 1.78 s min / 2.53 median, CPU 1.57 / 1.83;
after, wall see the session's report, CPU 0.51 / 0.55. Where the time went before (cProfile): the two
plans by the reference walk (~1.0 s each: a web process never loaded the compiled replay, which the core
takes cold only from 200k charts), and the per-chart pairing of ETAs through the plans' mappings
(~1.1-1.5 s: 200k lookups by id). Now the compiled replay is loaded on the first large what-if and the
moves are counted on the plans' arrays. What is left is the floor: two core plans (~0.17-0.2 s CPU each at
100k, `bench/bench_core.py`) and the snapshot (~0.06 s CPU, plus the server's scan).
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from backlog import run_at_sizes, seed_backlog, use_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCH_DB = "fairsched_bench_what_if"
use_database(BENCH_DB)


def change_sets() -> dict[str, dict[str, Any]]:
    from django.utils import timezone

    from charts.models import Chart
    from orgs.models import Provider, Workflow

    provider, _ = Provider.objects.get_or_create(slug="bench-api", defaults={"name": "bench"})
    Workflow.objects.filter(pk=Workflow.objects.order_by("pk").values("pk")[:1]).update(provider=provider)
    last = Chart.objects.order_by("-pk").values_list("pk", flat=True).first()
    until = timezone.now() + timedelta(hours=1)
    return {
        "weight": {"weights": {"org-0": 10}},
        "hold": {"hold": ["org-0"]},
        "budget+policy": {"budget": 400, "policy": "deficit", "quantum": 2.0},
        "caps": {"caps": {f"org-{i}": 1 for i in range(50)}},
        "priority": {"priorities": [{"chart": last, "high_priority": True}]},
        "provider pause": {"provider_pauses": [{"provider": "bench-api", "until": until}]},
    }


def measure(size: int) -> None:
    from scheduling.replan import plan_refresh
    from scheduling.what_if import plan_preview

    seed_backlog(size)
    plan_refresh()
    plan_preview(changes={})
    for name, changes in change_sets().items():
        walls, cpus = [], []
        for _ in range(5):
            started, cpu_started = time.perf_counter(), time.process_time()
            result = plan_preview(changes=changes)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu_started)
        print(
            f"{size:>8,} queued, {name:<15}: preview wall {min(walls):5.2f} s min,"
            f" {statistics.median(walls):5.2f} median;"
            f" CPU {min(cpus):5.2f} min, {statistics.median(cpus):5.2f} median ({result['charts_moved']:,} charts move)"
        )


def main() -> None:
    run_at_sizes(BENCH_DB, measure, description=__doc__)


if __name__ == "__main__":
    main()
