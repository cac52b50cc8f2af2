"""Benchmark the REST API on a live server: ingest (one by one and in bulk) and chart status latency.

    .venv/bin/python bench/bench_api.py [--single 500] [--bulk-requests 5] [--clients 50] [--per-client 40]

1. Create a fresh database `<name>_bench_api` on the server of DATABASE_URL, migrate it, make an org,
   a workflow and an org token (`manage.py issue_token`).
2. Start daphne (the project's ASGI server) on a free port of 127.0.0.1 against that database, with
   `bench/pooled_settings.py`: the project's settings with pooled database connections.
3. Ingest: `--single` POSTs of one chart, one after another; then `--bulk-requests` POSTs of 10,000.
4. Status: `--clients` threads, each with its own keep-alive connection, GET a chart `--per-client`
   times back to back (closed loop: the server is never idle), then paced at one request per client
   every `--pace` seconds (how status pages and pollers really call). p50/p95/p99 of each run.
5. Stop the server and drop the database. Every loop is bounded; the script prints its figures.

Target for bulk ingest (issue 17): >= 20,000 charts/s. Where a 10,000-chart bulk's time went before
(cProfile of `chart_submit_bulk`): ~80% in `bulk_create` of the charts and of their events (Django
preparing 260,000 values one by one, psycopg adapting them as query parameters), the rest the commit.
Now: one validating pass that writes each row once (payload JSON text included), a COPY into a
temporary table, and one INSERT ... SELECT that also writes the events and returns (id, external
id); in process a 10,000-chart request costs ~0.3 s CPU (JSON parse, validation, COPY, the answer).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import psycopg

ROOT = Path(__file__).resolve().parent.parent
BULK_SIZE = 10_000
GOAL_BULK_PER_SECOND = 20_000
GOAL_STATUS_P95_MS = 50.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Api:
    """One keep-alive connection with the token; each call returns (status, body, seconds)."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Token {token}", "Accept": "application/json"}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, float]:
        headers = dict(self.headers)
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        started = time.perf_counter()
        self.connection.request(method, path, body=payload, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        return response.status, json.loads(data) if is_json and data else data[:300], elapsed


def create_database(url: str) -> str:
    """A fresh database next to the one DATABASE_URL names; returns its URL."""
    parsed = urlparse(url)
    name = (parsed.path.lstrip("/") or "fairsched") + "_bench_api"
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlunparse(parsed._replace(path=f"/{name}"))


def drop_database(url: str) -> None:
    parsed = urlparse(url)
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{parsed.path.lstrip("/")}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def start_server(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fairsched.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "wb"),  # noqa: SIM115
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("the server did not start")


def bench_single(api: Api, count: int) -> dict[str, float]:
    latencies = []
    started = time.perf_counter()
    for i in range(count):
        status, _, elapsed = api.call("POST", "/api/v1/charts/", {"workflow": "bench", "external_id": f"single-{i}"})
        assert status == 201, status
        latencies.append(elapsed)
    total = time.perf_counter() - started
    return {
        "charts_per_s": count / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * percentile(latencies, 0.95),
    }


def bench_bulk(api: Api, requests: int) -> dict[str, float]:
    durations = []
    for r in range(requests):
        items = [{"workflow": "bench", "external_id": f"bulk-{r}-{i}", "payload": {"n": i}} for i in range(BULK_SIZE)]
        status, body, elapsed = api.call("POST", "/api/v1/charts/bulk/", {"items": items})
        assert status == 201, (status, str(body)[:200])
        assert body["created"] == BULK_SIZE
        durations.append(elapsed)
    return {
        "charts_per_s": BULK_SIZE * requests / sum(durations),
        "request_s_median": statistics.median(durations),
    }


def bench_status(
    port: int, token: str, ids: list[int], clients: int, per_client: int, pace: float | None
) -> dict[str, float]:
    """`clients` threads GET chart status; back to back when pace is None, else one request per `pace` s."""
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(seed: int) -> None:
        api = Api(port, token)
        pick = random.Random(seed)
        api.call("GET", f"/api/v1/charts/{ids[0]}/")  # open the connection
        barrier.wait()
        mine = []
        next_at = time.perf_counter() + (pick.random() * pace if pace else 0)
        for _ in range(per_client):
            if pace:
                time.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += pace
            status, body, elapsed = api.call("GET", f"/api/v1/charts/{pick.choice(ids)}/")
            if status != 200 and not errors:
                print(f"first error: {status} {body!r}", file=sys.stderr)
            if status != 200:
                errors.append(status)
            mine.append(elapsed)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "req_per_s": len(latencies) / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "p99_ms": 1000 * percentile(latencies, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--single", type=int, default=500, help="charts submitted one by one")
    parser.add_argument("--bulk-requests", type=int, default=5, help=f"bulk requests of {BULK_SIZE} charts")
    parser.add_argument("--clients", type=int, default=50, help="concurrent status clients")
    parser.add_argument("--per-client", type=int, default=40, help="status requests per client")
    parser.add_argument(
        "--pace", default="1,0.5", help="comma-separated seconds between a paced client's requests, one run each"
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    database_url = create_database(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched"))
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "pooled_settings",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)]),
        # The bench measures what one server can serve: one token stands for many callers here.
        "FAIRSCHED_API_READ_RATE": "off",
        "FAIRSCHED_API_WRITE_RATE": "off",
    }
    server = None
    try:
        manage(env, "migrate", "-v0")
        manage(
            env,
            "shell",
            "-c",
            "from orgs.models import Org, Workflow; Org.objects.create(name='Bench', slug='bench'); "
            "Workflow.objects.create(name='bench', workflow_type='fairsched.demo', task_queue='bench')",
        )
        token = manage(env, "issue_token", "bench-client", "--org", "bench")
        port = free_port()
        server = start_server(env, port)
        api = Api(port, token)

        single = bench_single(api, args.single)
        bulk = bench_bulk(api, args.bulk_requests)
        _, page, _ = api.call("GET", "/api/v1/charts/?page_size=1000")
        ids = [row["id"] for row in page["results"]]
        status_runs = {"back to back": bench_status(port, token, ids, args.clients, args.per_client, pace=None)}
        for pace in (float(value) for value in args.pace.split(",")):
            status_runs[f"paced 1 per {pace:g} s"] = bench_status(
                port, token, ids, args.clients, args.per_client, pace=pace
            )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        if not args.keep:
            drop_database(database_url)

    print(
        f"single submit: {single['charts_per_s']:.0f} charts/s, "
        f"p50 {single['p50_ms']:.1f} ms, p95 {single['p95_ms']:.1f} ms"
    )
    verdict = "meets" if bulk["charts_per_s"] >= GOAL_BULK_PER_SECOND else "MISSES"
    print(
        f"bulk submit:   {bulk['charts_per_s']:.0f} charts/s ({args.bulk_requests} x {BULK_SIZE}, "
        f"median {bulk['request_s_median']:.2f} s a request) - {verdict} the goal of {GOAL_BULK_PER_SECOND}/s"
    )
    print(f"pooled connections: {find_spec('psycopg_pool') is not None}")
    for label, figures in status_runs.items():
        verdict = "meets" if figures["p95_ms"] <= GOAL_STATUS_P95_MS else "MISSES"
        print(
            f"chart status, {args.clients} clients {label}: {figures['req_per_s']:.0f} req/s, "
            f"p50 {figures['p50_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, "
            f"{figures['errors']} errors - {verdict} the p95 goal of {GOAL_STATUS_P95_MS:.0f} ms"
        )


if __name__ == "__main__":
    main()
