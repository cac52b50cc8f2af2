"""CPU of the submit paths, in process: single submits and 10,000-chart bulks through the ASGI application.

    .venv/bin/python bench/bench_submit_cpu.py [--single 300] [--bulk 5] [--rounds 3] [--profile single|bulk]

On a machine shared with other work, throughput and latency through a server swing by tens of percent
run to run (bench/bench_api.py); the CPU time this process spends on a request moves least. The
application here is the one the web server runs (`fairsched.asgi.application`, pooled connections as in
`bench/pooled_settings.py`), called in process with an HTTP scope, rate limits on (one token per 20
single submits, as that many callers would be); `time.process_time` counts every thread of the process
(the handler's sync thread, the announcements' sender thread). PostgreSQL's own CPU is not in it.

1. Create a fresh database `<name>_bench_submit` next to DATABASE_URL's, migrate it, make an org, a
   workflow and org tokens.
2. `--rounds` rounds of: `--single` single submits (`POST /api/v1/charts/`), then `--bulk` bulks of
   10,000 (`POST /api/v1/charts/bulk/`); CPU and wall time of each request.
3. Print the median of the rounds' CPU per single submit and per bulk (and per chart), and wall times;
   and the CPU the announcements' sender thread (`common.events`) spent a single submit, from /proc
   (1.23-1.30 ms when it sent every announcement alone, 0.33-0.60 ms in batches: bench/bench_api.py).
   With `--profile`, print cProfile's top functions of that path instead of the rounds.
4. Drop the database (unless `--keep`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import psycopg
from inproc import http_scope

ROOT = Path(__file__).resolve().parent.parent
BULK_SIZE = 10_000
SUBMITS_PER_TOKEN = 20  # under the write rate's 20/s per caller however fast the loop runs
SETUP = (
    "from django.contrib.auth.models import User; from orgs.access import api_token_issue; "
    "from orgs.models import Org, Membership, Workflow; org = Org.objects.create(name='Bench', slug='bench'); "
    "Workflow.objects.create(name='bench', workflow_type='fairsched.demo', task_queue='bench'); "
    "users = [User.objects.create(username=f'bench-{{i}}') for i in range({count})]; "
    "[Membership.objects.create(user=u, org=org, role='member') for u in users]; "
    "print(' '.join(api_token_issue(user=u, org=org) for u in users))"
)


def database_url() -> str:
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")
    parsed = urlparse(url)
    name = (parsed.path.lstrip("/") or "fairsched") + "_bench_submit"
    return urlunparse(parsed._replace(path=f"/{name}"))


def admin_execute(url: str, statement: str) -> None:
    with psycopg.connect(urlunparse(urlparse(url)._replace(path="/postgres")), autocommit=True) as connection:
        connection.execute(statement)


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


class InProcessClient:
    """Calls the ASGI application in this process, one request at a time, on one event loop."""

    def __init__(self, application: Any) -> None:
        self.application = application
        self.loop = asyncio.new_event_loop()

    def post(self, path: str, token: str, data: bytes) -> tuple[int, bytes]:
        """POST a JSON body; the status and the body of the answer."""
        return self.loop.run_until_complete(self._post(path, token, data))

    async def _post(self, path: str, token: str, data: bytes) -> tuple[int, bytes]:
        scope = http_scope(
            "POST", path, token, (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())
        )
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.application(scope, receive, send)
        return status, b"".join(chunks)


def thread_cpu() -> float:
    return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def announcements_cpu(sender: Any) -> float:
    """CPU seconds the announcements' sender thread (`common.events._Sender`) has used so far, from /proc."""
    thread = sender._thread
    if thread is None or thread.native_id is None:
        return 0.0
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Timed:
    """CPU (every thread of the process; and the handler's sync thread alone: middleware, view,
    service, database driver) and wall seconds of each request, the client's JSON left out."""

    def __init__(self, client: InProcessClient, handler_cpu: list[float]) -> None:
        self.client = client
        self.handler_cpu = handler_cpu  # appended to by the handler, one value a request
        self.cpu: list[float] = []
        self.handler: list[float] = []
        self.wall: list[float] = []

    def post(self, path: str, token: str, body: Any) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        cpu, wall = time.process_time(), time.perf_counter()
        status, answer = self.client.post(path, token, data)
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        self.handler.append(self.handler_cpu.pop())
        return status, json.loads(answer or b"null")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--single", type=int, default=300, help="single submits a round")
    parser.add_argument("--bulk", type=int, default=5, help=f"bulks of {BULK_SIZE} a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", choices=["single", "bulk"], help="print cProfile's top functions of one path")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    url = database_url()
    name = urlparse(url).path.lstrip("/")
    admin_execute(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin_execute(url, f'CREATE DATABASE "{name}"')
    os.environ.update(
        DATABASE_URL=url,
        DEBUG="0",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="pooled_settings",
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/12"),
    )
    for rate in ("FAIRSCHED_API_READ_RATE", "FAIRSCHED_API_WRITE_RATE"):
        os.environ.pop(rate, None)  # the production defaults
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)])}
    try:
        manage(env, "migrate", "-v0")
        singles = args.single * (args.rounds + 1)
        tokens = manage(env, "shell", "-c", SETUP.format(count=1 + singles // SUBMITS_PER_TOKEN)).splitlines()[-1]
        sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
        from common.events import _sender
        from fairsched.asgi import application, django_asgi_app

        client = InProcessClient(application)
        run(client, tokens.split(), args, django_asgi_app.handler, _sender)  # Django's handler inside the bridge
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            admin_execute(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(client: InProcessClient, tokens: list[str], args: argparse.Namespace, handler: Any, sender: Any) -> None:
    counter = iter(range(10**9))
    handler_cpu: list[float] = []
    get_response = handler.get_response

    def timed_get_response(request: Any) -> Any:
        started = thread_cpu()
        try:
            return get_response(request)
        finally:
            handler_cpu.append(thread_cpu() - started)

    handler.get_response = timed_get_response
    untimed = Timed(client, handler_cpu)

    def single(timed: Timed = untimed) -> None:
        i = next(counter)
        body = {"workflow": "bench", "external_id": f"single-{i}"}
        status, answer = timed.post("/api/v1/charts/", tokens[1 + i // SUBMITS_PER_TOKEN], body)
        assert status == 201, (status, answer)

    def bulk(timed: Timed = untimed) -> None:
        i = next(counter)
        items = [{"workflow": "bench", "external_id": f"bulk-{i}-{j}", "payload": {"n": j}} for j in range(BULK_SIZE)]
        status, answer = timed.post("/api/v1/charts/bulk/", tokens[0], {"items": items})
        assert status == 201, (status, str(answer)[:200])
        assert answer["created"] == BULK_SIZE, answer["created"]

    for _ in range(args.single // 10 or 1):  # warm up: imports, pooled connections, caches
        single()
    if args.profile:
        path, count = (single, args.single) if args.profile == "single" else (bulk, args.bulk)
        # The handler's sync part (middleware, view, service, database) runs in a thread of its own:
        # profiled there, on that thread's CPU clock (not the event loop's waiting).
        profile = cProfile.Profile(thread_cpu)
        handler.get_response = partial(profile.runcall, timed_get_response)
        for _ in range(count):
            path()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(150)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        return

    rounds: list[tuple[Timed, Timed]] = []
    sender_cpu: list[float] = []
    for _ in range(args.rounds):
        singles, bulks = Timed(client, handler_cpu), Timed(client, handler_cpu)
        sender_before = announcements_cpu(sender)
        for _ in range(args.single):
            single(singles)
        while not sender._queue.empty():  # its last batch sent
            time.sleep(0.01)
        time.sleep(0.1)
        sender_cpu.append(announcements_cpu(sender) - sender_before)
        for _ in range(args.bulk):
            bulk(bulks)
        rounds.append((singles, bulks))
    print(f"reproduce: .venv/bin/python bench/bench_submit_cpu.py {' '.join(sys.argv[1:])}".rstrip())
    if args.single:
        cpu = [1000 * statistics.median(s.cpu) for s, _ in rounds]
        own = [1000 * statistics.median(s.handler) for s, _ in rounds]
        wall = [1000 * statistics.median(s.wall) for s, _ in rounds]
        print(
            f"single submit: CPU {statistics.median(cpu):.2f} ms a chart, handler thread {statistics.median(own):.2f}"
            f" ms (medians per round: {', '.join(f'{c:.2f}/{h:.2f}' for c, h in zip(cpu, own, strict=True))}),"
            f" wall p50 {statistics.median(wall):.1f} ms; the announcements' sender thread"
            f" {1000 * statistics.median(sender_cpu) / args.single:.2f} ms a chart"
        )
    if args.bulk:
        cpu = [statistics.median(b.cpu) for _, b in rounds]
        own = [statistics.median(b.handler) for _, b in rounds]
        wall = [statistics.median(b.wall) for _, b in rounds]
        rounds_shown = ", ".join(f"{c:.3f}/{h:.3f}" for c, h in zip(cpu, own, strict=True))
        print(
            f"bulk submit:   CPU {statistics.median(cpu):.3f} s a request of {BULK_SIZE}, handler thread"
            f" {statistics.median(own):.3f} s (medians per round: {rounds_shown}),"
            f" wall median {statistics.median(wall):.2f} s"
        )


if __name__ == "__main__":
    main()
