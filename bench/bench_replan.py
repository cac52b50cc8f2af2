"""Replan pass on PostgreSQL: load + plan + persist, with 10k and 100k queued charts.

Run: `.venv/bin/python bench/bench_replan.py [--sizes 10000,100000]`. It uses its own database
(`fairsched_bench` on the server of DATABASE_URL, created and dropped here), 500 orgs, budget 200.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")
BENCH_DB = "fairsched_bench"
os.environ["DATABASE_URL"] = BASE_URL.rsplit("/", 1)[0] + "/" + BENCH_DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")


def recreate_database() -> None:
    import psycopg

    with psycopg.connect(BASE_URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def seed(size: int, orgs: int = 500) -> None:
    from django.db import connection
    from django.utils import timezone

    from charts.models import Chart, ChartPlan
    from orgs.models import Org, Workflow
    from scheduling.reconcile import duration_record
    from scheduling.services import scheduler_config_set

    ChartPlan.objects.all().delete()
    Chart.objects.all().delete()
    Org.objects.all().delete()
    Workflow.objects.all().delete()
    rng = random.Random(7)
    org_rows = Org.objects.bulk_create(
        Org(name=f"Org {i}", slug=f"org-{i}", weight=rng.choice([1, 1, 2, 3]), max_concurrency=rng.choice([None, 5]))
        for i in range(orgs)
    )
    workflows = Workflow.objects.bulk_create(
        Workflow(name=f"wf-{i}", workflow_type="fairsched.demo", task_queue="bench", default_cost=cost)
        for i, cost in enumerate([1, 1, 2, 4])
    )
    scheduler_config_set(actor="bench", budget=200)
    # Learned durations with a spread, so that the pass also replays the p10 and p90 ETA bands.
    for workflow in workflows:
        for seconds in (40, 60, 90):
            duration_record(org_id=org_rows[0].pk, workflow_id=workflow.pk, seconds=seconds)
    now = timezone.now()
    buffer = io.StringIO()
    for i in range(size):
        org = org_rows[min(int(rng.paretovariate(1.2)) - 1, orgs - 1) if i % 2 else rng.randrange(orgs)]
        created = now.timestamp() - rng.uniform(0, 86400)
        buffer.write(
            f"{org.pk}\t{rng.choice(workflows).pk}\tb{i}\t{{}}\tqueued\tf\t0\t"
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(created))}+00\t0\t\t\t\t{now.isoformat()}\n"
        )
    with connection.cursor() as cursor:
        with cursor.connection.cursor().copy(
            "COPY charts_chart (org_id, workflow_id, external_id, payload, state, high_priority, priority,"
            " created_at, attempt, last_error, temporal_workflow_id, temporal_run_id, updated_at) FROM STDIN"
        ) as copy:
            copy.write(buffer.getvalue())
        cursor.execute("ANALYZE charts_chart")


def measure(size: int) -> None:
    from scheduling import core
    from scheduling.replan import plan_refresh
    from scheduling.snapshot import load_snapshot

    seed(size)
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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    recreate_database()
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    for size in (int(s) for s in args.sizes.split(",")):
        measure(size)
    from django.db import connections

    connections.close_all()


if __name__ == "__main__":
    main()
