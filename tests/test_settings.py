"""Settings come from the environment; with production values `check --deploy` finds nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
