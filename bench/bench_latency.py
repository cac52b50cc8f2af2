"""Time from a run's completion to the next start, on the real stack.

Run: `.venv/bin/python bench/bench_latency.py [--charts 60] [--duration 1.0] [--budget 2]`.
It starts its own Temporal dev server, redis-server, the demo Temporal worker (whose completion
hint queues a reconcile) and a Celery worker with beat, against a database of its own
(`<name>_latency` beside DATABASE_URL's database). With a backlog bigger than the budget, every
completion should free budget for the next start: the figure is start - preceding completion.
Target (issue 17): p95 <= 0.2 s.

Where the time went (issue 17; p50 0.31 s, p95 0.40 s before): the hint was sent with a 0.25 s
countdown (the hint activity runs just before its workflow closes) and looked again every 0.25 s;
then the task replanned (load, plan, persist) before it dispatched. Now the hint looks after 50 ms
and again every 50 ms, and the task dispatches into the freed budget against the persisted order
first, asking for the replan after (p50 0.08 s, p95 0.12 s, same machine, back to back; the rest
is the Celery hop, one describe round trip and the claim).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")
# A database of its own beside DATABASE_URL's (so that two checkouts on one server do not collide).
GOAL_P95_SECONDS = 0.2
DB = BASE_URL.rsplit("/", 1)[1] + "_latency"
os.environ["DATABASE_URL"] = BASE_URL.rsplit("/", 1)[0] + "/" + DB
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--charts", type=int, default=60)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--budget", type=int, default=2)
    args = parser.parse_args()

    import psycopg

    with psycopg.connect(BASE_URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")

    from fairsched.devservices import start_redis, start_temporal

    data = Path(tempfile.mkdtemp(prefix="fairsched-latency-"))
    redis = start_redis(data)
    temporal = start_temporal(port=None, log_dir=data / "logs")
    os.environ.update(REDIS_URL=redis.value, TEMPORAL_ADDRESS=temporal.value, TEMPORAL_TASK_QUEUE="latency")
    children: list[subprocess.Popen[bytes]] = []
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from charts.models import Chart, ChartEvent, ChartState
        from charts.services import ChartRequest, chart_submit_bulk
        from common.actors import Actor
        from knobs.services import scheduler_config_set
        from orgs.models import Org, Workflow

        scheduler_config_set(
            actor=Actor.system("bench"), budget=args.budget, replan_interval=2.0, reconcile_interval=2.0
        )
        workflow = Workflow.objects.create(
            name="latency", workflow_type="fairsched.demo", task_queue="latency", params={"duration": args.duration}
        )
        for name in ("Acme", "Beta"):
            Org.objects.create(name=name, slug=name.lower())
        env = dict(os.environ)
        log = (data / "logs" / "processes.log").open("ab")
        for command in (
            [sys.executable, "manage.py", "temporal_worker", "--task-queue", "latency"],
            [sys.executable, "-m", "celery", "-A", "fairsched", "worker", "-B", "--concurrency", "2",
             "--schedule", str(data / "beat"), "--loglevel", "WARNING"],
        ):  # fmt: skip
            children.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        time.sleep(3)
        for org in Org.objects.all():
            chart_submit_bulk(
                org=org,
                items=[ChartRequest(workflow.name, f"{org.slug}-{i}") for i in range(args.charts // 2)],
                actor=Actor.system("bench"),
            )
        deadline = time.monotonic() + args.charts * args.duration / args.budget * 3 + 60
        while time.monotonic() < deadline:
            if Chart.objects.filter(state=ChartState.SUCCEEDED).count() == args.charts:
                break
            time.sleep(0.5)
        finishes = sorted(Chart.objects.filter(state=ChartState.SUCCEEDED).values_list("finished_at", flat=True))
        starts = sorted(ChartEvent.objects.filter(to_state=ChartState.DISPATCHING).values_list("at", flat=True))
        gaps = []
        for start in starts:
            before = [f for f in finishes if f <= start]
            if before:
                gaps.append((start - before[-1]).total_seconds())
        gaps = gaps[: args.charts - args.budget]
        done = Chart.objects.filter(state=ChartState.SUCCEEDED).count()
        print(f"{done}/{args.charts} charts done; completion -> next claim over {len(gaps)} starts:")
        if gaps:
            quantiles = statistics.quantiles(gaps, n=20)
            p95 = quantiles[18]
            verdict = "meets" if p95 <= GOAL_P95_SECONDS else "MISSES"
            print(
                f"  p50 {statistics.median(gaps):.3f} s   p95 {p95:.3f} s   max {max(gaps):.3f} s"
                f" - {verdict} the goal of p95 <= {GOAL_P95_SECONDS} s"
            )
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                child.kill()
        temporal.stop()
        redis.stop()
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    main()
