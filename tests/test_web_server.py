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
from pathlib import Path

import pytest

from fairsched.devservices import free_port
from fairsched.launcher import procfile_commands

ROOT = Path(__file__).resolve().parents[1]
BIN_DIR = Path(sys.executable).parent
WAIT_SECONDS = 60.0


def wait_for_text(log: Path, text: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while text not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not logged within {WAIT_SECONDS:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


@pytest.mark.slow
def test_sigterm_lets_the_request_in_progress_finish(tmp_path: Path) -> None:
    """The slow request is a /readyz whose Temporal never answers: it spends its 2 s check retrying
    the connection, and logs its first failed attempt, which is when the server is told to stop."""
    port = free_port()
    log = tmp_path / "web.log"
    env = {
        **os.environ,
        "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "PYTHONUNBUFFERED": "1",
    }
    with log.open("wb") as sink:
        server = subprocess.Popen(
            ["sh", "-c", procfile_commands()["web"]], cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_for_text(log, "Started server process")
        answer: dict[str, object] = {}

        def slow_request() -> None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_SECONDS)
            connection.request("GET", "/readyz")
            response = connection.getresponse()
            answer["status"] = response.status
            answer["body"] = json.loads(response.read())

        client = threading.Thread(target=slow_request)
        client.start()
        wait_for_text(log, "not reachable (attempt 1)")
        server.send_signal(signal.SIGTERM)
        client.join(WAIT_SECONDS)
        assert answer["status"] == 503
        assert "temporal" in answer["body"]["failed"]  # type: ignore[index]
        assert server.wait(WAIT_SECONDS) == 0
        assert "Handling signal: term" in log.read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
