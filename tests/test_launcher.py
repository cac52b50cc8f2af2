"""The launcher's pure pieces, and the launcher run with stand-in children (its embedded services are
`fairsched.devservices`'s, tested in `test_devservices.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fairsched.devservices import EMBEDDABLE_VARIABLES, REPO_ROOT, executable, free_port
from fairsched.launcher import app_commands, banner, services_to_embed
from tests.processes import end, start


@pytest.mark.parametrize(
    ("env", "embedded"),
    [
        ({}, ["DATABASE_URL", "REDIS_URL", "TEMPORAL_ADDRESS"]),
        ({"DATABASE_URL": "postgres://db/x"}, ["REDIS_URL", "TEMPORAL_ADDRESS"]),
        ({"REDIS_URL": "", "TEMPORAL_ADDRESS": "t:7233"}, ["DATABASE_URL", "REDIS_URL"]),
        ({name: "set" for name in EMBEDDABLE_VARIABLES}, []),
        ({"PATH": "/bin", "PORT": "9000"}, ["DATABASE_URL", "REDIS_URL", "TEMPORAL_ADDRESS"]),
    ],
)
def test_services_to_embed(env: dict[str, str], embedded: list[str]) -> None:
    assert services_to_embed(env) == embedded


def test_app_commands_run_programs_of_the_environment() -> None:
    commands = app_commands(port=8123, data_dir=Path("/data"))

    assert set(commands) == {"web", "celery", "temporal-worker"}
    assert commands["web"][-3:] == ["-p", "8123", "fairsched.asgi:application"]
    assert commands["celery"][5:7] == ["--schedule-filename", "/data/celerybeat-schedule"]
    assert commands["web"][0] == executable("daphne")


def test_banner_lists_the_urls_and_the_demo_output() -> None:
    text = banner(port=8123, demo_output="admin login: admin / secret\n", embedded=[])

    for path in ("/admin/", "/dashboard/", "/portal/", "/api/docs/", "/metrics"):
        assert f"http://127.0.0.1:8123{path}" in text
    assert "admin login: admin / secret" in text


SUPERVISED_DRIVER = """
import os, sys
import fairsched.launcher as launcher

port, sleep_seconds, worker = sys.argv[1], sys.argv[2], sys.argv[3]
launcher._manage = lambda env, *args: "demo says: admin / secret" if args == ("demo",) else ""
launcher.app_commands = lambda *, port, data_dir: {
    "web": [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
    worker: ["sleep", sleep_seconds],
}
sys.exit(launcher.run(os.environ))
"""


@pytest.fixture
def supervised_launcher(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts the launcher with stand-in children (a web server and a sleeping `worker`) and external
    services; what it started is ended after the test."""
    launched: list[subprocess.Popen[str]] = []

    def launch(*, sleep_seconds: int, worker: str = "sleeper") -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "DATABASE_URL": "postgres://external/db",
            "REDIS_URL": "redis://external:6379/0",
            "TEMPORAL_ADDRESS": "external:7233",
            "FAIRSCHED_DATA_DIR": str(tmp_path),
            "PORT": str(free_port()),
        }
        launched.append(
            start(
                [sys.executable, "-c", SUPERVISED_DRIVER, env["PORT"], str(sleep_seconds), worker],
                cwd=REPO_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        return launched[-1]

    yield launch
    for process in launched:
        end(process)


def read_until(process: subprocess.Popen[str], marker: str) -> str:
    assert process.stdout is not None
    seen = ""
    for line in process.stdout:
        seen += line
        if marker in line:
            return seen
    raise AssertionError(f"{marker!r} never printed:\n{seen}")


def test_sigterm_stops_the_children_and_exits_0(supervised_launcher: Callable[..., subprocess.Popen[str]]) -> None:
    launcher = supervised_launcher(sleep_seconds=60)
    started = read_until(launcher, "Ctrl-C stops everything.")
    assert "/admin/" in started
    assert "demo says: admin / secret" in started
    assert "embedded" not in started

    launcher.send_signal(signal.SIGTERM)
    rest, _ = launcher.communicate(timeout=30)

    assert launcher.returncode == 0, rest
    assert "launcher: SIGTERM, stopping" in rest
    assert "launcher: web stopped" in rest
    assert "launcher: sleeper stopped (-15)" in rest


def test_a_dying_child_stops_everything_and_exits_1(supervised_launcher: Callable[..., subprocess.Popen[str]]) -> None:
    launcher = supervised_launcher(sleep_seconds=2)

    output, _ = launcher.communicate(timeout=30)

    assert launcher.returncode == 1, output
    assert "launcher: sleeper exited (0); stopping everything" in output
    assert "launcher: web stopped" in output


def test_a_crashed_worker_is_started_again_until_it_crashes_too_often(
    supervised_launcher: Callable[..., subprocess.Popen[str]],
) -> None:
    launcher = supervised_launcher(sleep_seconds=0, worker="celery")

    output, _ = launcher.communicate(timeout=60)

    assert output.count("launcher: celery exited (0); starting it again") == 5
    assert "launcher: celery exited (0); stopping everything" in output
    assert launcher.returncode == 1, output
    assert "launcher: web stopped" in output
