"""What the benchmarks share: a database of their own, and a large backlog written fast (COPY).

The backlog: `orgs` orgs of weights 1-3 (some capped), four workflows of costs 1, 1, 2 and 4, budget
200, learned durations with a spread (so replans also replay the ETA bands), and `size` queued charts,
half spread evenly over the orgs and half drawn from a Pareto law (a few orgs hold most of it).
"""

from __future__ import annotations

import argparse
import io
import os
import random
import time
from collections.abc import Callable

BASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")


def use_database(name: str) -> None:
    """Point DATABASE_URL (read when Django starts) at database `name` on BASE_URL's server."""
    os.environ["DATABASE_URL"] = BASE_URL.rsplit("/", 1)[0] + "/" + name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")


def recreate_database(name: str) -> None:
    import psycopg

    with psycopg.connect(BASE_URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(BASE_URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def seed_backlog(size: int, orgs: int = 500) -> None:
    """Replace every org, workflow and chart with the benchmark backlog (see the module docstring)."""
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
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(created))}+00\t0\t\t\t\t{now.isoformat()}\t0\n"
        )
    with connection.cursor() as cursor:
        with cursor.connection.cursor().copy(
            "COPY charts_chart (org_id, workflow_id, external_id, payload, state, high_priority, priority,"
            " created_at, attempt, last_error, temporal_workflow_id, temporal_run_id, updated_at, service) FROM STDIN"
        ) as copy:
            copy.write(buffer.getvalue())
        cursor.execute("ANALYZE charts_chart")


def run_at_sizes(name: str, measure: Callable[[int], None], *, description: str | None) -> None:
    """A benchmark's main: `--sizes` (default 10000,100000); database `name` made afresh and
    migrated, `measure(size)` for each size, then the database dropped, whatever happened."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    recreate_database(name)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            measure(size)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(name)
