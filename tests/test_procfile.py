"""The Procfile as an operator runs it: two of every process type, each started from its Procfile
command, against the test database, Redis and a real Temporal dev server. Each comes up healthy,
charts submitted through either web process run to success once each, and SIGTERM stops every
process cleanly (exit 0)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from charts.models import IN_FLIGHT_STATES, Chart, ChartEvent, ChartState
from common.actors import Actor
from fairsched.celery import app as celery_app
from fairsched.devservices import free_port, port_is_free
from fairsched.launcher import procfile_commands
from knobs.services import scheduler_config_set
from orgs.access import api_token_issue
from orgs.models import Membership
from tests.database import database_url
from tests.factories import MembershipFactory, OrgFactory, UserFactory, WorkflowFactory
from tests.processes import end, start

pytestmark = [pytest.mark.temporal, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[1]
BIN_DIR = Path(sys.executable).parent
KINDS = ("web", "worker", "beat", "temporal")
INSTANCES = 2
START_SECONDS = 120.0
STOP_SECONDS = 60.0


def two_free_ports() -> int:
    """A port p with p and p + 1 free: honcho gives web.1 PORT=p and web.2 PORT=p+1."""
    while True:
        port = free_port()
        if port < 65000 and port_is_free(port + 1):
            return port


def call(method: str, url: str, *, token: str = "", body: Any = None) -> tuple[int, Any]:
    """(status, parsed JSON body) of one request; (0, None) when nothing answers."""
    parsed = urllib.parse.urlsplit(url)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=10)
    try:
        connection.request(method, parsed.path, body=None if body is None else json.dumps(body), headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    except OSError:
        return 0, None
    finally:
        connection.close()


@dataclass
class Stack:
    """The Procfile's processes, each started as a process manager does (`sh -c COMMAND` in a session
    of its own, so a stop signals its whole group), with one log file each."""

    processes: dict[str, subprocess.Popen[bytes]]
    logs: list[Path]
    web_urls: list[str]
    task_queue: str

    def output(self) -> str:
        return "".join(log.read_text(errors="replace") for log in self.logs)

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = START_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout:.0f} s\n{self.output()[-4000:]}")
            time.sleep(0.25)

    def logged(self, message: str) -> int:
        """How many processes logged `message` (as a JSON line)."""
        return self.output().count(f'"message": "{message}')

    def stop(self) -> dict[str, int]:
        """SIGTERM to every process group at once, as systemd (KillMode=control-group), honcho and
        `docker stop` of a shell-less image do; wait up to STOP_SECONDS; return the exit codes."""
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        codes = {}
        for name, process in self.processes.items():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STOP_SECONDS)
            codes[name] = end(process, grace=0)  # what is left of the group once its leader has exited
        return codes


@pytest.fixture
def stack(temporal_settings: Any, tmp_path: Path) -> Iterator[Stack]:
    port = two_free_ports()
    queue = f"procfile-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "TEMPORAL_ADDRESS": temporal_settings.TEMPORAL_ADDRESS,
        "TEMPORAL_TASK_QUEUE": queue,
        "CACHE_PREFIX": f"procfile-{os.getpid()}",
        "CHANNELS_PREFIX": f"procfile-{os.getpid()}",
        "HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "1",
        "CELERY_WORKER_CONCURRENCY": "1",
        "FAIRSCHED_LOG_JSON": "1",
        "PYTHONUNBUFFERED": "1",
    }
    celery_app.control.purge()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs = []
    for kind, command in procfile_commands().items():
        for instance in range(INSTANCES):
            name = f"{kind}.{instance + 1}"
            logs.append(tmp_path / f"{name}.log")
            with logs[-1].open("wb") as sink:
                processes[name] = start(
                    ["sh", "-c", command], cwd=ROOT, env={**env, "PORT": str(port + instance)},
                    stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                )  # fmt: skip
    running = Stack(processes, logs, [f"http://127.0.0.1:{port + i}" for i in range(INSTANCES)], queue)
    try:
        yield running
    finally:
        running.stop()
        celery_app.control.purge()


def test_the_procfile_names_every_process_type() -> None:
    commands = procfile_commands()
    assert set(commands) == set(KINDS)
    assert commands["web"].startswith("exec gunicorn ")
    assert "beat" in commands["beat"]


def test_two_of_every_process_type_serve_and_stop_cleanly(stack: Stack) -> None:
    # 1. Every process comes up: both web processes ready, both Celery workers answer a ping, both
    #    beats and both Temporal workers say so.
    for url in stack.web_urls:
        stack.wait_for(f"{url}/healthz", lambda url=url: call("GET", f"{url}/healthz")[0] == 200)
        status, body = call("GET", f"{url}/readyz")
        assert status == 200, body
    stack.wait_for("two Celery workers", lambda: len(celery_app.control.ping(timeout=1.0)) == INSTANCES)
    stack.wait_for("two Temporal workers", lambda: stack.logged("temporal worker polling") == INSTANCES)
    stack.wait_for("two beats", lambda: stack.logged("beat: Starting") == INSTANCES)

    # 2. Charts submitted through either web process run to success, each started once.
    scheduler_config_set(actor=Actor("user:test", staff=True), budget=2, replan_interval=0.5, reconcile_interval=0.5)
    org = OrgFactory(slug="procfile")
    user = UserFactory(username="procfile-client")
    MembershipFactory(user=user, org=org, role=Membership.Role.MEMBER)
    WorkflowFactory(name="pf", task_queue=stack.task_queue, params={"duration": 0.2})
    token = api_token_issue(user=user, org=org)
    for i in range(6):
        url = stack.web_urls[i % INSTANCES]
        status, body = call(
            "POST", f"{url}/api/v1/charts/", token=token, body={"workflow": "pf", "external_id": f"c{i}"}
        )
        assert status == 201, body
    stack.wait_for(
        "six charts succeeded",
        lambda: Chart.objects.filter(state=ChartState.SUCCEEDED).count() == 6,
        timeout=START_SECONDS,
    )
    # Each claim is the chart's first, or follows a recorded reason to claim it again (a failed run's
    # retry, a claim whose workflow never started put back): none is a second dispatcher's claim.
    trails: defaultdict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for event in ChartEvent.objects.order_by("id"):
        trails[event.chart_id].append((event.from_state, event.to_state, event.reason))
    for chart_id, trail in trails.items():
        claims = [i for i, (_, to, _) in enumerate(trail) if to == ChartState.DISPATCHING]
        assert claims, (chart_id, trail)
        for i in claims[1:]:
            put_back, claim = trail[i - 1], trail[i]
            assert claim[0] in (ChartState.RETRY_WAIT, ChartState.QUEUED), (chart_id, trail)
            assert put_back[1] == claim[0], (chart_id, trail)
            assert put_back[0] in IN_FLIGHT_STATES, (chart_id, trail)

    # 3. JSON log lines from every process type.
    json_lines = [line for line in stack.output().splitlines() if line.startswith("{")]
    assert any(json.loads(line)["logger"].startswith("celery") for line in json_lines)

    # 4. SIGTERM (what systemd, Kubernetes and honcho send) stops every process with exit 0, and no
    #    Celery task is lost to a pool process killed under it.
    codes = stack.stop()
    assert set(codes) == {f"{kind}.{i}" for kind in KINDS for i in range(1, INSTANCES + 1)}
    assert {name: code for name, code in codes.items() if code != 0} == {}, stack.output()[-3000:]
    assert "WorkerLostError" not in stack.output()
