"""What the reconcile pass's cancel step costs when nothing waits on Temporal: with 10k and 100k
cancelled charts whose workflows have closed, finding the (none) still to close must stay a
few milliseconds (a partial index), since it runs on every pass.

Run: `.venv/bin/python bench/bench_reconcile.py [--sizes 10000,100000]`. It uses its own database
(`fairsched_bench_reconcile` on the server of DATABASE_URL, created and dropped here).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from backlog import run_at_sizes, seed_backlog, use_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCH_DB = "fairsched_bench_reconcile"
REPEATS = 50
use_database(BENCH_DB)


def measure(size: int) -> None:
    from django.db import connection
    from django.utils import timezone

    from charts.models import Chart, ChartState
    from scheduling.reconcile import close_cancelled

    seed_backlog(size)
    Chart.objects.update(state=ChartState.CANCELLED, finished_at=timezone.now(), temporal_workflow_id="chart-x")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE charts_chart")
    pending = Chart.objects.filter(state=ChartState.CANCELLED, cancel_requested_at__isnull=False)
    plan = pending.explain()
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        close_cancelled()
        times.append(time.perf_counter() - started)
    uses_index = "chart_cancel_requested_idx" in plan
    print(
        f"{size:>8,} cancelled charts, none to close: cancel step median {statistics.median(times) * 1000:.2f} ms, "
        f"max {max(times) * 1000:.2f} ms over {REPEATS} passes (partial index used: {uses_index})"
    )


def main() -> None:
    run_at_sizes(BENCH_DB, measure, description=__doc__)


if __name__ == "__main__":
    main()
