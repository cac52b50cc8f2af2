"""Benchmark webhook latency: from an event's commit to its delivery at a receiver, through a real Celery
worker with beat and its feed listener (`feed.listener`: woken at the commit; the tick,
`FAIRSCHED_WEBHOOK_TICK`, is the safety net) and Redis; with `--demo-load`, under `make run`'s demo.

    .venv/bin/python bench/bench_webhooks.py [--events 200] [--rate 10] [--tick 0.5] [--demo-load]

1. Create a fresh database `<name>_bench_webhooks` next to DATABASE_URL's, migrate it, make a held org
   (its charts never dispatch), a workflow and an endpoint for the org's `chart.cancelled` events to
   a receiver on 127.0.0.1 (plain http and loopback allowed, as in the tests).
2. Start `make run`'s Celery worker (`-B`, two pool children) and wait until its listener listens.
   With `--demo-load`: first a Temporal dev server, `manage.py demo --charts N` (make run's seed),
   the Temporal worker running the demo's charts, `--submit-rate` submits a second to the demo's
   orgs meanwhile (replans, dispatches, reconciles follow), and a second endpoint hearing every
   event of every org, as the load run's receiver does.
3. Submit and cancel `--events` charts at `--rate` a second, noting each cancel's commit time; the
   receiver notes when each delivery arrives (the first time per idempotency key) and counts repeats.
4. Print p50/p95/max of commit -> arrival, lost and repeated deliveries; stop the children, drop the
   database. Target (issue 30): p95 within 1 s.

Measured 2026-12-03 on the shared 2-core machine (load 4-14, five other sessions' tests running),
150 events at 10/s:
- without load: p50 254 ms, p95 776 ms, max 1706 ms, 0 lost, 0 repeats (horizon p95 97 ms); before
  the listener (woken by the tick only, 2026-12-02, load 3-6): p50 443 ms, p95 702 ms.
- `--demo-load`, sender tasks in the pool (commit 84b8976): run 1 (load 9.6 -> 14) p50 7058 ms,
  p95 19.7 s, max 21.0 s; run 2 (load 9) p50 594 ms, p95 1009 ms, max 1236 ms; 0 lost, 0 repeats.
  The sender tasks waited in the pool's one queue behind the passes (replan, dispatch, reconcile)
  on the worker's two children, while the listener had collected within ~100-200 ms.
- `--demo-load`, sent from the listener's own threads (now): run 1 (load 9.2 -> 8.0) p50 504 ms,
  p95 913 ms, max 1201 ms (horizon p95 164 ms; the every-event endpoint 182 of 182, p95 980 ms from
  its events' `at`); run 2 (load 7.2 -> 11.2) p50 845 ms, p95 1433 ms, max 1630 ms (horizon p95
  254 ms; every-event endpoint p95 1414 ms). 0 lost, 0 repeats in both. The target is met in one
  run of two: on this machine, shared with five sessions' tests, the rest is CPU (the collect, a
  feed read of four logs, takes 100-200 ms loaded; the horizon 50-250 ms).
- `--demo-load` on a quiet machine (08:22-08:24 UTC, load 1-3, after the session's merges): run 1
  p50 202 ms, p95 371 ms, max 546 ms (horizon p95 50 ms; the every-event endpoint 189 of 189, p95
  376 ms); run 2 p50 292 ms, p95 605 ms, max 1292 ms (every-event endpoint p95 564 ms). 0 lost,
  0 repeats. The target (p95 1 s under the demo load) is met in both.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_api import create_database, drop_database, manage, percentile  # noqa: E402  (the same helpers)

from fairsched.devservices import free_port, start_temporal  # noqa: E402

GOAL_P95_SECONDS = 1.0


class Arrivals:
    def __init__(self) -> None:
        self.first: dict[str, tuple[float, dict[str, Any]]] = {}  # idempotency key -> (arrival, event data)
        self.repeats = 0
        self.lock = threading.Lock()


def start_receiver(arrivals: Arrivals) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            now = time.time()
            key = self.headers.get("Idempotency-Key", "")
            with arrivals.lock:
                if key in arrivals.first:
                    arrivals.repeats += 1
                else:
                    arrivals.first[key] = (now, json.loads(body)["data"])
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Horizon(threading.Thread):
    """Notes when the feed's horizon first passes each watched transaction (polled every 10 ms)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.pending: dict[int, int] = {}
        self.passed: dict[int, float] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def watch(self, chart_id: int, txid: int) -> None:
        with self.lock:
            self.pending[chart_id] = txid

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        from django.db import connection

        from feed.selectors import feed_horizon

        while not self.stopped.wait(0.01):
            now, horizon = time.time(), feed_horizon()
            with self.lock:
                for chart_id, txid in list(self.pending.items()):
                    if txid < horizon:
                        self.passed[chart_id] = now
                        del self.pending[chart_id]
        connection.close()


class DemoLoad(threading.Thread):
    """Submits to the demo's orgs at `rate` a second, as its clients would, with its workflows' mix; the
    worker replans, dispatches and reconciles them as they run on the Temporal worker."""

    def __init__(self, rate: float) -> None:
        super().__init__(daemon=True)
        self.rate = rate
        self.submitted = self.failed = 0
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        from django.db import connection

        from charts.services import chart_submit
        from common.actors import Actor
        from common.errors import ServiceError
        from orgs.models import Org

        orgs = list(Org.objects.filter(slug__in=["acme", "beta", "gamma"]))
        workflows = ["render"] * 5 + ["simulate"] * 2 + ["export"] * 2 + ["flaky"]
        draw = random.Random(7)
        n = 0
        while not self.stopped.wait(draw.expovariate(self.rate)):
            n += 1
            try:
                chart_submit(
                    org=draw.choice(orgs),
                    workflow=draw.choice(workflows),
                    external_id=f"load-{n}",
                    actor=Actor.system("load"),
                )
                self.submitted += 1
            except ServiceError:
                self.failed += 1
        connection.close()


def listening_wait(timeout: float = 120.0) -> None:
    """Until the worker's feed listener listens (`make run`'s worker is up long before its events)."""
    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = %s",
                ["LISTEN fairsched_feed"],
            )
            if cursor.fetchone()[0]:
                return
        time.sleep(0.2)
    raise SystemExit("the worker's feed listener did not start")


def worker_start(env: dict[str, str], scratch: Path) -> subprocess.Popen[bytes]:
    """`make run`'s Celery worker (fairsched/launcher.py): two pool children, beat embedded."""
    return spawn(
        [sys.executable, "-m", "celery", "-A", "fairsched", "worker", "-B", "--concurrency", "2",
         "--loglevel", os.environ.get("BENCH_LOGLEVEL", "WARNING"), "--schedule", str(scratch / "beat"), "-Q", "celery",
         "--without-gossip", "--without-mingle"],
        env,
    )  # fmt: skip


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A child in a session of its own; its output goes to BENCH_LOG if set."""
    log = open(os.environ.get("BENCH_LOG", os.devnull), "ab")  # noqa: SIM115  (the child keeps it)
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(child: subprocess.Popen[bytes]) -> None:
    os.killpg(child.pid, 15)
    try:
        child.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, 9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=10.0, help="events a second")
    parser.add_argument("--tick", type=float, default=0.5, help="FAIRSCHED_WEBHOOK_TICK for the worker")
    parser.add_argument("--demo-load", action="store_true", help="run `make run`'s demo meanwhile (step 2)")
    parser.add_argument("--submit-rate", type=float, default=5.0, help="the demo load's submits a second")
    parser.add_argument("--demo-charts", type=int, default=300, help="`manage.py demo --charts` (its backlog)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    temporal = start_temporal(port=free_port(), log_dir=scratch) if args.demo_load else None

    database_url = create_database(
        os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched"), suffix="_bench_webhooks"
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"),
        "CACHE_PREFIX": f"bench-webhooks-{os.getpid()}",
        "FAIRSCHED_WEBHOOK_ALLOW_HTTP": "1",
        "FAIRSCHED_WEBHOOK_ALLOW_PRIVATE": "1",
        "FAIRSCHED_WEBHOOK_TICK": str(args.tick),
        **(
            {"TEMPORAL_ADDRESS": temporal.value}
            if temporal
            else {"TEMPORAL_ADDRESS": "127.0.0.1:1", "TEMPORAL_CONNECT_TIMEOUT": "0.2"}
        ),
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "CACHE_PREFIX")})
    os.environ.update({k: env[k] for k in ("FAIRSCHED_WEBHOOK_ALLOW_HTTP", "FAIRSCHED_WEBHOOK_ALLOW_PRIVATE")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    if temporal:
        manage(env, "demo", "--charts", str(args.demo_charts))

    import django

    django.setup()
    from django.utils import timezone

    from charts import services as chart_services
    from charts.models import ChartEvent
    from common.actors import Actor
    from feed import services
    from feed.models import WebhookDelivery
    from feed.selectors import WEBHOOK_TYPES
    from orgs.models import Org, Workflow

    org = Org.objects.create(name="Bench", slug="bench", weight=0)  # held: its charts are only cancelled
    Workflow.objects.create(name="bench", workflow_type="fairsched.demo", task_queue="bench-none")
    arrivals = Arrivals()
    receiver = start_receiver(arrivals)
    services.webhook_endpoint_create(
        org=org,
        url=f"http://127.0.0.1:{receiver.server_address[1]}/",
        event_types=["chart.cancelled"],
        actor=Actor.system("bench"),
    )
    everything = Arrivals()
    everything_receiver = start_receiver(everything)
    if temporal:  # the load run's endpoint: every event of every org
        services.webhook_endpoint_create(
            org=None,
            url=f"http://127.0.0.1:{everything_receiver.server_address[1]}/",
            event_types=list(WEBHOOK_TYPES),
            actor=Actor.system("bench"),
        )
    children = [worker_start(env, scratch)]
    if temporal:
        children.append(spawn([sys.executable, "manage.py", "temporal_worker"], env))
    load = DemoLoad(args.submit_rate) if temporal else None
    written = late = 0
    committed: dict[int, float] = {}
    horizon = Horizon()
    try:
        listening_wait()  # the worker's start
        horizon.start()
        if load:
            load.start()
            time.sleep(10)  # the demo's backlog starts to run, the submits flow
        gap = 1.0 / args.rate
        for n in range(args.events):
            chart, _ = chart_services.chart_submit(
                org=org, workflow="bench", external_id=f"b-{n}", actor=Actor.system("bench")
            )
            chart_services.chart_cancel(chart=chart, actor=Actor.system("bench"))
            committed[chart.pk] = time.time()
            txid = ChartEvent.objects.filter(chart=chart, to_state="cancelled").values_list("txid", flat=True)[0]
            horizon.watch(chart.pk, txid)
            time.sleep(gap)
        deadline = time.monotonic() + 60
        while len(arrivals.first) < args.events and time.monotonic() < deadline:
            time.sleep(0.1)
        if load:
            load.stop()
            load.join()
            time.sleep(3)
            global_deliveries = WebhookDelivery.objects.filter(endpoint__org=None)
            written = global_deliveries.count()
            late = global_deliveries.filter(
                state=WebhookDelivery.State.PENDING, created_at__lt=timezone.now() - timedelta(seconds=3)
            ).count()
    finally:
        horizon.stop()
        for child in children:
            stop(child)
        receiver.shutdown()
        everything_receiver.shutdown()
        from django.db import connections

        connections.close_all()
        drop_database(database_url)
        if temporal:
            temporal.stop()
    shown = f"--events {args.events} --rate {args.rate} --tick {args.tick}"
    if load:
        shown += f" --demo-load --submit-rate {args.submit_rate} --demo-charts {args.demo_charts}"
    print(f"reproduce: .venv/bin/python bench/bench_webhooks.py {shown}")
    behind = [horizon.passed[chart] - committed[chart] for chart in committed if chart in horizon.passed]
    if behind:
        print(
            f"commit -> the feed's horizon passes it: p50 {percentile(behind, 0.5) * 1000:.0f} ms,"
            f" p95 {percentile(behind, 0.95) * 1000:.0f} ms, max {max(behind) * 1000:.0f} ms"
            " (transactions open in the database hold it back)"
        )
    latencies = [at - committed[data["chart"]] for at, data in arrivals.first.values() if data["chart"] in committed]
    if os.environ.get("BENCH_DUMP"):
        Path(os.environ["BENCH_DUMP"]).write_text("\n".join(f"{latency:.3f}" for latency in latencies))
    lost = args.events - len(arrivals.first)
    if latencies:
        p95 = percentile(latencies, 0.95)
        verdict = "meets" if p95 <= GOAL_P95_SECONDS and not lost else "MISSES"
        print(
            f"commit -> delivery: p50 {percentile(latencies, 0.5) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms,"
            f" max {max(latencies) * 1000:.0f} ms over {len(latencies)} deliveries; {lost} lost,"
            f" {arrivals.repeats} repeats (each under its key) - {verdict} the goal of p95 {GOAL_P95_SECONDS:.0f} s"
        )
    else:
        print(f"no delivery arrived; {lost} lost")
    if load:
        print(
            f"the demo load meanwhile: {load.submitted} submits, {load.failed} refused;"
            f" the load's endpoint (every event, every org): {written} deliveries written, {late} pending"
            f" for over 3 s at the end, {len(everything.first)} received, {everything.repeats} repeats"
        )
        since_event = [at - datetime.fromisoformat(data["at"]).timestamp() for at, data in everything.first.values()]
        if since_event:
            print(
                f"  its event (written inside its transaction, so an upper bound of commit) -> delivery:"
                f" p50 {percentile(since_event, 0.5) * 1000:.0f} ms, p95 {percentile(since_event, 0.95) * 1000:.0f} ms,"
                f" max {max(since_event) * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
