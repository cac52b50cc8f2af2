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
from dataclasses import dataclass

BASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")


def best(action: Callable[[], object], runs: int = 3) -> float:
    """The shortest wall time of `runs` runs of `action`, in seconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


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


WORKFLOW_COSTS = (1, 1, 2, 4)
# Every workflow's learned durations, recorded against the first org (so every chart's expected
# duration and spread come from them, through the fallbacks of `snapshot.Durations`).
LEARNED_SECONDS = (40, 60, 90)


@dataclass(frozen=True)
class BacklogDraw:
    """The benchmark backlog as drawn (see the module docstring), before it becomes rows.

    Orgs are numbered 0..orgs-1 and workflows 0..3 (costs `WORKFLOW_COSTS`); chart i is of org
    `chart_org[i]` and workflow `chart_workflow[i]`, created `created_ago[i]` seconds before now
    (a float: the database keeps the whole second of `now - created_ago`).
    """

    org_weight: list[int]
    org_cap: list[int | None]
    chart_org: list[int]
    chart_workflow: list[int]
    created_ago: list[float]


def draw_backlog(size: int, orgs: int = 500) -> BacklogDraw:
    """The benchmark backlog of `size` charts over `orgs` orgs, the same draw every time."""
    rng = random.Random(7)
    org_weight, org_cap = [], []
    for _ in range(orgs):
        org_weight.append(rng.choice([1, 1, 2, 3]))
        org_cap.append(rng.choice([None, 5]))
    chart_org, chart_workflow, created_ago = [], [], []
    for i in range(size):
        chart_org.append(min(int(rng.paretovariate(1.2)) - 1, orgs - 1) if i % 2 else rng.randrange(orgs))
        created_ago.append(rng.uniform(0, 86400))
        chart_workflow.append(rng.randrange(len(WORKFLOW_COSTS)))
    return BacklogDraw(org_weight, org_cap, chart_org, chart_workflow, created_ago)


def seed_backlog(size: int, orgs: int = 500) -> None:
    """Replace every org, workflow and chart with the benchmark backlog (see the module docstring)."""
    from django.db import connection
    from django.utils import timezone

    from charts.models import Chart, ChartPlan
    from common.actors import Actor
    from knobs.services import scheduler_config_set
    from orgs.models import Org, Workflow
    from scheduling.reconcile import duration_record

    ChartPlan.objects.all().delete()
    Chart.objects.all().delete()
    Org.objects.all().delete()
    Workflow.objects.all().delete()
    draw = draw_backlog(size, orgs)
    org_rows = Org.objects.bulk_create(
        Org(name=f"Org {i}", slug=f"org-{i}", weight=weight, max_concurrency=cap)
        for i, (weight, cap) in enumerate(zip(draw.org_weight, draw.org_cap, strict=True))
    )
    workflows = Workflow.objects.bulk_create(
        Workflow(name=f"wf-{i}", workflow_type="fairsched.demo", task_queue="bench", default_cost=cost)
        for i, cost in enumerate(WORKFLOW_COSTS)
    )
    scheduler_config_set(actor=Actor.system("bench"), budget=200)
    for workflow in workflows:
        for seconds in LEARNED_SECONDS:
            duration_record(org_id=org_rows[0].pk, workflow_id=workflow.pk, seconds=seconds)
    now = timezone.now()
    buffer = io.StringIO()
    for i, (org, kind, ago) in enumerate(zip(draw.chart_org, draw.chart_workflow, draw.created_ago, strict=True)):
        created = now.timestamp() - ago
        buffer.write(
            f"{org_rows[org].pk}\t{workflows[kind].pk}\tb{i}\t{{}}\tqueued\tf\t0\t"
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
