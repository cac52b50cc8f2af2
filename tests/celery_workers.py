"""`celery worker -B` as child processes of a test, on the test's database, Redis and Temporal:
`celery_workers(tmp_path, TEMPORAL_ADDRESS=..., ...)` gives a function that starts (or restarts) one;
every one started is ended at the end (`tests.processes.end`), and the broker is purged before and
after so that no task of another test runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from tests.database import database_url
from tests.processes import end
from tests.processes import start as start_process

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def celery_workers(tmp_path: Path, **environment: str) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CACHE_PREFIX": f"celerytest-{os.getpid()}",
        **environment,
    }
    children: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        log = (tmp_path / f"worker{len(children)}.log").open("wb")
        child = start_process(
            [sys.executable, "-m", "celery", "-A", "fairsched", "worker", "-B", "--concurrency", "2",
             "--loglevel", "INFO", "--schedule", str(tmp_path / "beat-schedule"), "-Q", "celery",
             "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        children.append(child)
        return child

    from fairsched.celery import app

    app.control.purge()
    try:
        yield start
    finally:
        for child in children:
            end(child, grace=15)
        app.control.purge()
