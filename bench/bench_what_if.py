"""The what-if preview on PostgreSQL: snapshot + two core plans + per-chart moves, 10k and 100k queued.

Run: `.venv/bin/python bench/bench_what_if.py [--sizes 10000,100000]`. It uses its own database
(`fairsched_bench_what_if` on the server of DATABASE_URL, created and dropped here) and the backlog of
`bench/backlog.py` (500 orgs). Each line is the best of three previews of one change set.
"""

from __future__ import annotations

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
    for name, changes in change_sets().items():
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            result = plan_preview(changes=changes)
            best = min(best, time.perf_counter() - started)
        print(f"{size:>8,} queued, {name:<15}: preview {best:6.2f} s ({result['charts_moved']:,} charts move)")


def main() -> None:
    run_at_sizes(BENCH_DB, measure, description=__doc__)


if __name__ == "__main__":
    main()
