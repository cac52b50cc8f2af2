"""Settings come from the environment; with production values `check --deploy` finds nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from fairsched.settings import env_positive, env_whole

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = {
    "SECRET_KEY": "x7-production-secret-of-fifty-or-more-characters-0123456789-abcdef",
    "DEBUG": "0",
    "FAIRSCHED_HTTPS": "1",
    "ALLOWED_HOSTS": "fairsched.example.com",
}


def check_deploy(**overrides: str) -> subprocess.CompletedProcess[str]:
    # The browser tests allow sync ORM calls beside Playwright's loop; a deployment never does.
    inherited = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {**inherited, **PRODUCTION, **overrides}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_production_values_pass_the_deploy_check() -> None:
    result = check_deploy()
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_the_development_key_is_flagged() -> None:
    result = check_deploy(SECRET_KEY="")
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_only_postgresql_is_accepted() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": "sqlite:///tmp/x.db"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "DATABASE_URL must point at PostgreSQL" in result.stderr


@pytest.mark.parametrize(("query", "seconds"), [("", 10), ("?connect_timeout=3", 3)])
def test_a_database_that_never_answers_fails_the_connection_after_its_timeout(query: str, seconds: int) -> None:
    """Every process connects with a timeout (10 s unless DATABASE_URL says otherwise): a server that
    takes the connection and never answers (hung, or a proxy to nowhere) is an error the process
    reports and retries, not a web thread or a Celery pass held for ever."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody answers
        url = f"postgres://postgres@127.0.0.1:{silent.getsockname()[1]}/nothing{query}"
        started = time.monotonic()
        connect = "from django.db import connection; connection.ensure_connection()"
        result = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", connect],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": url},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        waited = time.monotonic() - started
    assert result.returncode != 0
    assert "OperationalError" in result.stderr
    assert seconds <= waited < seconds + 20  # the timeout, plus the interpreter's start


def test_run_timeout_cancel_grace_and_throttle_settings_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSCHED_CANCEL_GRACE", "2.5")
    assert env_positive("FAIRSCHED_CANCEL_GRACE", 30.0) == 2.5
    monkeypatch.delenv("FAIRSCHED_CANCEL_GRACE")
    assert env_positive("FAIRSCHED_CANCEL_GRACE", 30.0) == 30.0
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv("FAIRSCHED_THROTTLE_PAUSE", bad)
        with pytest.raises(ImproperlyConfigured, match="FAIRSCHED_THROTTLE_PAUSE"):
            env_positive("FAIRSCHED_THROTTLE_PAUSE", 60.0)
    monkeypatch.setenv("FAIRSCHED_RUN_TIMEOUT", "1.5")
    with pytest.raises(ImproperlyConfigured, match="FAIRSCHED_RUN_TIMEOUT must be a whole number"):
        env_positive("FAIRSCHED_RUN_TIMEOUT", 86400, whole=True)


def test_the_retention_is_a_whole_number_of_days_zero_included(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAIRSCHED_RETENTION_DAYS", raising=False)
    assert env_whole("FAIRSCHED_RETENTION_DAYS", 90) == 90
    for good, days in (("0", 0), (" 30 ", 30), ("365", 365)):
        monkeypatch.setenv("FAIRSCHED_RETENTION_DAYS", good)
        assert env_whole("FAIRSCHED_RETENTION_DAYS", 90) == days
    for bad in ("-1", "1.5", "ninety", "", "\u00b2"):
        monkeypatch.setenv("FAIRSCHED_RETENTION_DAYS", bad)
        with pytest.raises(ImproperlyConfigured, match="FAIRSCHED_RETENTION_DAYS must be a whole number of 0 or more"):
            env_whole("FAIRSCHED_RETENTION_DAYS", 90)


def test_a_bad_run_timeout_stops_the_process_naming_the_variable() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "FAIRSCHED_RUN_TIMEOUT": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "FAIRSCHED_RUN_TIMEOUT must be a whole number greater than 0" in result.stderr
