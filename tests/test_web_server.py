"""The Procfile's web command (gunicorn with uvicorn workers) stops gracefully: on SIGTERM a request
already in progress is answered in full, then the server exits 0."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fairsched.devservices import free_port
from fairsched.launcher import procfile_commands
from tests.processes import running

ROOT = Path(__file__).resolve().parents[1]
BIN_DIR = Path(sys.executable).parent
WAIT_SECONDS = 60.0


def wait_for_text(log: Path, text: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while text not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not logged within {WAIT_SECONDS:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


@contextmanager
def web_server(log: Path, **overrides: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The Procfile's web command with one worker, its output in `log`; yields it and its port once
    it serves."""
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "PYTHONUNBUFFERED": "1",
        **overrides,
    }
    with (
        log.open("wb") as sink,
        running(
            ["sh", "-c", procfile_commands()["web"]], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        ) as server,
    ):
        wait_for_text(log, "Started server process")
        yield server, port


def slow_readyz(port: int, answer: dict[str, object]) -> threading.Thread:
    """A /readyz on its way in a thread; `answer` gets its status and body when it is answered."""

    def slow_request() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)
        connection.request("GET", "/readyz")
        response = connection.getresponse()
        answer["status"] = response.status
        answer["body"] = json.loads(response.read())

    client = threading.Thread(target=slow_request)
    client.start()
    return client


@pytest.mark.slow
def test_sigterm_lets_the_request_in_progress_finish(tmp_path: Path) -> None:
    """The slow request is a /readyz whose Temporal never answers: it spends its 2 s check retrying
    the connection, and logs its first failed attempt, which is when the server is told to stop."""
    log = tmp_path / "web.log"
    with web_server(log) as (server, port):
        answer: dict[str, object] = {}
        client = slow_readyz(port, answer)
        wait_for_text(log, "not reachable (attempt 1)")
        server.send_signal(signal.SIGTERM)
        client.join(WAIT_SECONDS)
        assert answer["status"] == 503
        assert "temporal" in answer["body"]["failed"]  # type: ignore[index]
        assert server.wait(WAIT_SECONDS) == 0
        assert "Handling signal: term" in log.read_text()


@pytest.mark.slow
def test_liveness_is_answered_while_every_request_thread_is_busy(tmp_path: Path) -> None:
    """/healthz says the process serves, not that a request thread is free: with the worker's one
    thread held by a /readyz waiting on an unreachable Temporal (as a database outage holds them all),
    /healthz is answered at once on the event loop. Queued behind the threads, liveness probes fail
    during any outage and the orchestrator restarts every web process for what a restart cannot mend."""
    log = tmp_path / "web.log"
    with web_server(log, FAIRSCHED_WEB_THREADS="1") as (_, port):
        answer: dict[str, object] = {}
        client = slow_readyz(port, answer)
        wait_for_text(log, "not reachable (attempt 1)")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert "status" not in answer  # the /readyz still holds the thread
        assert (response.status, json.loads(response.read())) == (200, {"status": "ok"})
        assert response.getheader("Cache-Control") == "no-store"
        assert response.getheader("Content-Type") == "application/json"
        client.join(WAIT_SECONDS)
        assert answer["status"] == 503
