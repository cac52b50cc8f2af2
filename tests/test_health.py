"""/healthz and /readyz on the real PostgreSQL, Redis and Temporal dev server, and `manage.py readyz`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from fairsched import health
from fairsched.devservices import free_port
from scheduling.temporal.client import reset_client

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def forget_migrations_seen() -> Iterator[None]:
    health._migrations_applied = False
    yield
    health._migrations_applied = False


def test_healthz_answers_without_any_dependency(client: Client) -> None:
    """No `db` fixture: a database query here would fail the test."""
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_probes_are_answered_for_any_host_and_without_the_https_redirect(client: Client, settings: Any) -> None:
    """Orchestrators probe a pod by its IP over plain HTTP."""
    settings.SECURE_SSL_REDIRECT = True
    response = client.get("/healthz/", HTTP_HOST="10.1.2.3:8000")
    assert response.status_code == 200


def test_probes_take_only_get_and_head(client: Client) -> None:
    response = client.post("/healthz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert client.head("/healthz").status_code == 200


@pytest.mark.temporal
@pytest.mark.django_db
def test_readyz_is_ready_when_every_dependency_answers(client: Client, temporal_settings: Any) -> None:
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert body["checks"] == {"database": "ok", "migrations": "ok", "redis": "ok", "temporal": "ok"}


@pytest.mark.temporal
@pytest.mark.django_db
def test_readyz_names_redis_when_it_does_not_answer(client: Client, temporal_settings: Any) -> None:
    temporal_settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["failed"] == ["redis"]
    assert body["checks"]["redis"] == "unreachable (ConnectionError)"
    assert "127.0.0.1" not in json.dumps(body), "addresses stay out of the public answer"


@pytest.mark.django_db
def test_readyz_names_temporal_when_it_does_not_answer(client: Client, settings: Any) -> None:
    settings.TEMPORAL_ADDRESS = f"127.0.0.1:{free_port()}"
    settings.TEMPORAL_CONNECT_TIMEOUT = 1.0
    reset_client()
    try:
        response = client.get("/readyz")
    finally:
        reset_client()
    body = response.json()
    assert response.status_code == 503
    assert "temporal" in body["failed"]
    assert body["checks"]["temporal"] == "not serving"


@pytest.mark.temporal
@pytest.mark.django_db
def test_readyz_names_migrations_not_applied(client: Client, temporal_settings: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = 'scheduling' AND name = '0003_arrival_window'")
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["failed"] == ["migrations"]
    assert body["checks"]["migrations"] == "1 migrations not applied (run manage.py migrate)"


def run_readyz(timeout: float = 60, **overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "readyz"],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_CONNECT_TIMEOUT": "1", **overrides},
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def test_readyz_command_names_an_unreachable_database_and_exits_1() -> None:
    result = run_readyz(DATABASE_URL=f"postgres://postgres@127.0.0.1:{free_port()}/nothing")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "database: unreachable (OperationalError)" in result.stdout
    assert "migrations: database unavailable" in result.stdout
    assert "not ready: database, migrations" in result.stderr


@pytest.mark.parametrize("pool", ["0", "1"])
def test_readyz_names_a_database_that_never_answers_within_the_check_s_timeout(pool: str) -> None:
    """A server that takes the connection and never answers (hung, or a proxy to nowhere) fails the
    check after its timeout: a probe must get its 503 while the prober still waits, and must not hold
    a web thread for the pool's 30 s wait (with the web server's pool) or for ever (without one)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody answers
        port = silent.getsockname()[1]
        result = run_readyz(
            timeout=30, DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/nothing", FAIRSCHED_DB_POOL=pool
        )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "database: unreachable (ConnectionTimeout)" in result.stdout


@pytest.mark.temporal
def test_readyz_command_exits_0_when_ready(temporal_server: str, django_db_setup: None) -> None:
    """Against the test database (migrated by pytest-django) and the session's Temporal server."""
    from django.conf import settings

    name = settings.DATABASES["default"]["NAME"]
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched").rsplit("/", 1)[0]
    result = run_readyz(DATABASE_URL=f"{url}/{name}", TEMPORAL_ADDRESS=temporal_server)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "ready"
