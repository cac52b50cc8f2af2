"""CPU per chart status read in process: the project's ASGI application (as uvicorn calls it) against
Django's WSGI handler called directly (the floor: no server, no thread hand-over).

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/bench_http_cpu.py asgi|wsgi [--reads 1000]

Uses the database of DATABASE_URL (migrated): makes an org `bench-http` with 1,000 charts once, a
member and an org token, then reads random charts of it back to back, 200 reads first to warm up.
The read throttle stays on (one Redis round trip a read) with a rate no loop reaches. Prints the
process's CPU time per read (every thread: the pool's included) and the wall time per read.

Figure behind `fairsched.wsgi_bridge`, as measured when it was written: Django's ASGI handler spent
~1.2 ms of CPU a status read in its hops between the event loop and threads, a third of the read.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from inproc import http_scope

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.pooled_settings")
CHARTS = 1000
WARM_UP = 200


def prepare() -> tuple[str, list[int]]:
    """The org's token and its charts' ids (the org and its charts made on the first run)."""
    from django.contrib.auth.models import User
    from django.db import connections

    from charts.models import Chart
    from orgs.access import CallerReadThrottle, api_token_issue
    from orgs.models import Membership, Org
    from tests.factories import ChartFactory, WorkflowFactory

    org, made = Org.objects.get_or_create(slug="bench-http", defaults={"name": "bench-http"})
    if made:
        workflow = WorkflowFactory(name="bench-http")
        ChartFactory.create_batch(CHARTS, org=org, workflow=workflow)
    user, _ = User.objects.get_or_create(username="bench-http")
    Membership.objects.get_or_create(user=user, org=org, defaults={"role": "member"})
    token = api_token_issue(user=user, org=org)
    ids = list(Chart.objects.filter(org=org).values_list("id", flat=True))
    connections.close_all()
    CallerReadThrottle.THROTTLE_RATES = {"read": "1000000/s", "write": "1000000/s"}
    return token, ids


def asgi_reads(token: str, ids: list[int], count: int) -> tuple[float, float]:
    from fairsched.asgi import application

    pick = random.Random(1)

    async def one() -> None:
        path = f"/api/v1/charts/{pick.choice(ids)}/"
        scope = http_scope("GET", path, token)
        sent: list[dict[str, Any]] = []
        given: list[int] = []

        async def receive() -> dict[str, Any]:
            if given:
                await asyncio.Event().wait()
            given.append(1)
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await application(scope, receive, send)
        assert sent[0]["status"] == 200, sent

    async def main() -> tuple[float, float]:
        for _ in range(WARM_UP):
            await one()
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(count):
            await one()
        return time.process_time() - cpu, time.perf_counter() - wall

    return asyncio.run(main())


def wsgi_reads(token: str, ids: list[int], count: int) -> tuple[float, float]:
    from django.core.handlers.wsgi import WSGIHandler

    handler = WSGIHandler()
    pick = random.Random(1)

    def one() -> None:
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": f"/api/v1/charts/{pick.choice(ids)}/",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Token {token}",
            "HTTP_ACCEPT": "application/json",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.input": io.BytesIO(b""),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
        }
        statuses: list[str] = []
        response = handler(environ, lambda status, headers, exc_info=None: statuses.append(status))
        b"".join(response)
        response.close()
        assert statuses[0].startswith("200"), statuses

    for _ in range(WARM_UP):
        one()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        one()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["asgi", "wsgi"])
    parser.add_argument("--reads", type=int, default=1000)
    args = parser.parse_args()
    import django

    django.setup()
    token, ids = prepare()
    run = asgi_reads if args.mode == "asgi" else wsgi_reads
    cpu, wall = run(token, ids, args.reads)
    print(
        f"{args.mode} status read: CPU {1000 * cpu / args.reads:.3f} ms, wall {1000 * wall / args.reads:.3f} ms"
        f" a read ({args.reads} reads)"
    )


if __name__ == "__main__":
    main()
