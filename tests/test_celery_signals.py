"""How a real Celery worker (prefork, Redis broker) stops: a pool child is stopped by its parent, never
by a SIGTERM of its own. Process managers signal a worker's whole process group (honcho, systemd's
default `KillMode=control-group`); a child that died of that SIGTERM after taking a pass from its
parent and before running it lost the pass (`WorkerLostError`), the race the Procfile run met."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.database import database_url
from tests.processes import end, start

pytestmark = [pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
READY_SECONDS = 60.0
STOP_SECONDS = 30.0


def children_of(pid: int) -> set[int]:
    """The pids whose parent is `pid`, read from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name sits in parentheses and may hold spaces; the parent pid follows it.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not read its status yet.
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], set[int]]]:
    """A `celery worker` with two pool children, in a session of its own as a process manager starts
    it, once it is ready; with the pids of its pool children."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "CACHE_PREFIX": f"signaltest-{os.getpid()}",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        process = start(
            [sys.executable, "-m", "celery", "-A", "fairsched", "worker", "--concurrency", "2", "--loglevel",
             "INFO", "-Q", f"signaltest-{os.getpid()}", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + READY_SECONDS
        while b" ready." not in log_path.read_bytes() or len(children_of(process.pid)) < 2:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        yield process, children_of(process.pid)
    finally:
        end(process)


def wait_exit(process: subprocess.Popen[bytes], pids: set[int]) -> int:
    """The worker's exit status once it and every one of `pids` has exited."""
    status = process.wait(STOP_SECONDS)
    deadline = time.monotonic() + STOP_SECONDS
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if alive(pid)]
        time.sleep(0.1)
    return status


def test_a_pool_child_outlives_a_sigterm_of_its_own(worker: tuple[subprocess.Popen[bytes], set[int]]) -> None:
    process, pool = worker
    child = min(pool)
    os.kill(child, signal.SIGTERM)
    time.sleep(2.0)  # billiard's default would have ended the child at once and forked another
    assert alive(child)
    assert children_of(process.pid) == pool


def test_a_sigterm_to_the_group_stops_the_worker_and_its_children_cleanly(
    worker: tuple[subprocess.Popen[bytes], set[int]],
) -> None:
    process, pool = worker
    os.killpg(process.pid, signal.SIGTERM)
    assert wait_exit(process, pool) == 0


def test_a_cold_stop_of_the_worker_alone_still_ends_its_children(
    worker: tuple[subprocess.Popen[bytes], set[int]],
) -> None:
    """SIGQUIT to the parent is Celery's cold shutdown: it stops its children at once, though they
    ignore SIGTERM."""
    process, pool = worker
    os.kill(process.pid, signal.SIGQUIT)
    wait_exit(process, pool)
