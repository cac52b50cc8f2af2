"""Liveness and readiness: `/healthz` (the process answers) and `/readyz` (it can do its work).

Both are answered by `HealthMiddleware`, first in the middleware stack (and `/healthz`, under ASGI, by
`LivenessOnTheLoop` before a request thread is asked for), before the host check, the HTTPS redirect,
sessions and authentication: a load balancer or an orchestrator probes a pod by its IP
address over plain HTTP and without credentials, and must get the answer the process would give to a
user, not a 400 for an unknown Host or a redirect.

- `/healthz` touches no dependency: 200 `{"status": "ok"}` whenever the process serves requests.
  Restart the process when it fails.
- `/readyz` runs `readiness_checks()`: PostgreSQL answers, every migration is applied, Redis answers,
  Temporal answers. 200 `{"status": "ready", "checks": {...}}` when all pass, else 503
  `{"status": "unavailable", "failed": [names], "checks": {name: "ok" | reason}}`. Take the process out
  of rotation while it fails; do not restart it (a restart does not bring a database back).
  The reasons name the failure's kind, never addresses or credentials; the details go to the log.

`manage.py readyz` runs the same checks for the process types that serve no HTTP (Celery, beat, the
Temporal worker): exit 0 when ready, 1 naming what failed.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import redis
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.http import HttpRequest, HttpResponse

from scheduling.temporal.client import check_health as temporal_check_health

logger = logging.getLogger(__name__)

HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
CHECK_TIMEOUT_SECONDS = 2.0
PROBE_METHODS = ("GET", "HEAD")
LIVENESS: dict[str, object] = {"status": "ok"}
CACHE_CONTROL = "no-store"


@dataclass(frozen=True)
class CheckResult:
    """One dependency's answer: `ok`, or the reason it failed (no addresses, no secrets)."""

    name: str
    ok: bool
    reason: str = "ok"


class CheckFailed(Exception):
    """A check found its dependency up but not usable; the message is the public reason."""


def check_database() -> None:
    """PostgreSQL answers a query within `CHECK_TIMEOUT_SECONDS`.

    On a connection of its own, with libpq's connect timeout (whole seconds, at least 2): Django's
    would wait out the web server's pool (30 s for a connection) or, without a pool, a server that
    takes the connection and never answers, for ever; a probe must be answered while its prober
    still waits, and must not hold a web thread meanwhile.
    """
    params = connection.get_connection_params()
    params["connect_timeout"] = max(2, math.ceil(CHECK_TIMEOUT_SECONDS))
    with psycopg.connect(**params) as probe:
        probe.execute("SELECT 1").fetchone()


_migrations_applied = False


def check_migrations() -> None:
    """Every migration this code knows is applied. Once seen applied, a process does not look again:
    migrations are applied before a release's processes start and never taken back under them."""
    global _migrations_applied
    if _migrations_applied:
        return
    # Every node of the graph, not a plan to its leaves: a migration missing below an applied one
    # (a squash, a hand-edited history) is missing all the same.
    loader = MigrationLoader(connection)
    pending = [key for key in loader.graph.nodes if key not in loader.applied_migrations]
    if pending:
        raise CheckFailed(f"{len(pending)} migrations not applied (run manage.py migrate)")
    _migrations_applied = True


def check_redis() -> None:
    """Redis (cache, Channels layer, Celery broker) answers PING; the broker too if it is another server."""
    urls = dict.fromkeys([settings.REDIS_URL, settings.CELERY_BROKER_URL])
    for url in urls:
        client = redis.Redis.from_url(
            url, socket_timeout=CHECK_TIMEOUT_SECONDS, socket_connect_timeout=CHECK_TIMEOUT_SECONDS
        )
        try:
            client.ping()
        finally:
            client.close()


def check_temporal() -> None:
    """The Temporal frontend of `TEMPORAL_ADDRESS` reports itself serving."""
    if not temporal_check_health(timeout=CHECK_TIMEOUT_SECONDS):
        raise CheckFailed("not serving")


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "migrations": check_migrations,
    "redis": check_redis,
    "temporal": check_temporal,
}


def readiness_checks() -> list[CheckResult]:
    """Run every check in order; a failing database skips the migrations check (it cannot answer)."""
    results: list[CheckResult] = []
    for name, check in CHECKS.items():
        if name == "migrations" and not results[0].ok:
            results.append(CheckResult(name, ok=False, reason="database unavailable"))
            continue
        try:
            check()
        except CheckFailed as err:
            results.append(CheckResult(name, ok=False, reason=str(err)))
        except Exception as err:
            logger.warning("readiness: %s failed: %r", name, err)
            results.append(CheckResult(name, ok=False, reason=f"unreachable ({type(err).__name__})"))
        else:
            results.append(CheckResult(name, ok=True))
    return results


def readiness_body(results: list[CheckResult]) -> tuple[int, dict[str, object]]:
    """The HTTP status and JSON body of `/readyz` for these results."""
    failed = [result.name for result in results if not result.ok]
    checks = {result.name: result.reason for result in results}
    if failed:
        return 503, {"status": "unavailable", "failed": failed, "checks": checks}
    return 200, {"status": "ready", "checks": checks}


def _json(status: int, body: dict[str, object]) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["Cache-Control"] = CACHE_CONTROL
    return response


LIVENESS_BODY = json.dumps(LIVENESS).encode()


class LivenessOnTheLoop:
    """ASGI: answer `/healthz` (GET or HEAD) on the event loop, before a request thread is asked for.

    The web server runs each request in one of `WEB_THREADS` threads (fairsched/wsgi_bridge.py), and a
    database or Temporal outage holds them all (a pooled connection is waited for up to 30 s): queued
    behind them, liveness probes would fail during any outage, and the orchestrator would restart
    every web process for what a restart cannot mend. Its answer is `HealthMiddleware`'s, which still
    answers everything else (a 405, `/readyz`) and `/healthz` where no ASGI server runs.
    """

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        path = scope.get("path", "")[len(scope.get("root_path", "")) :].rstrip("/")
        if scope["type"] != "http" or path != HEALTHZ_PATH or scope["method"] not in PROBE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(LIVENESS_BODY)).encode()),
            (b"cache-control", CACHE_CONTROL.encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": LIVENESS_BODY if scope["method"] == "GET" else b""})


class HealthMiddleware:
    """Answer `/healthz` and `/readyz` (GET or HEAD) before any other middleware sees the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info.rstrip("/")
        if path not in (HEALTHZ_PATH, READYZ_PATH):
            return self.get_response(request)
        if request.method not in PROBE_METHODS:
            response = _json(405, {"detail": f'Method "{request.method}" not allowed.'})
            response["Allow"] = ", ".join(PROBE_METHODS)
            return response
        if path == HEALTHZ_PATH:
            return _json(200, LIVENESS)
        started = time.perf_counter()
        status, body = readiness_body(readiness_checks())
        body["seconds"] = round(time.perf_counter() - started, 3)
        response = _json(status, body)
        # A probe every few seconds must not log an ERROR per failed probe through django.request
        # (which logs every 5xx); `readiness_checks` has logged what failed, once per check.
        response._has_been_logged = True  # type: ignore[attr-defined]
        return response
