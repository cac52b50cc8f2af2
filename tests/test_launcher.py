"""The launcher's pure pieces, and its embedded services started for real."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import dj_database_url
import psycopg
import pytest

from fairsched.launcher import (
    EMBEDDABLE_VARIABLES,
    REPO_ROOT,
    ChildProcess,
    LauncherError,
    app_commands,
    banner,
    executable,
    free_port,
    port_is_free,
    redis_ping,
    services_to_embed,
    start_postgres,
    start_redis,
    start_temporal,
    temporal_ready,
    wait_until,
)


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


def test_free_port_is_bindable_until_taken() -> None:
    port = free_port()

    assert 1024 <= port <= 65535
    assert port_is_free(port)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert not port_is_free(port)


def test_executables_come_from_the_environment() -> None:
    commands = app_commands(port=8123, data_dir=Path("/data"))

    assert set(commands) == {"web", "celery", "temporal-worker"}
    assert commands["web"][-3:] == ["-p", "8123", "fairsched.asgi:application"]
    assert commands["celery"][5:7] == ["--schedule-filename", "/data/celerybeat-schedule"]
    assert Path(executable("temporal")).is_file()
    with pytest.raises(LauncherError, match="no-such-program"):
        executable("no-such-program")


def test_banner_lists_the_urls_and_the_demo_output() -> None:
    text = banner(port=8123, demo_output="admin login: admin / secret\n", embedded=[])

    for path in ("/admin/", "/dashboard/", "/portal/", "/api/docs/", "/metrics"):
        assert f"http://127.0.0.1:8123{path}" in text
    assert "admin login: admin / secret" in text


def test_wait_until_fails_when_the_process_dies_or_time_runs_out() -> None:
    with pytest.raises(LauncherError, match="exited while starting"):
        wait_until(lambda: False, what="thing", alive=lambda: False)
    with pytest.raises(LauncherError, match="not ready after"):
        wait_until(lambda: False, what="thing", timeout=0.3)


def test_child_that_ignores_sigterm_is_killed() -> None:
    child = ChildProcess.spawn(
        "stubborn",
        ["sh", "-c", "trap '' TERM; echo ready; sleep 60"],
    )
    assert child.process.stdout is not None
    assert child.process.stdout.readline() == b"ready\n"

    code = child.stop(timeout=0.5)

    assert code == -9
    assert not child.alive()


def test_embedded_redis_answers_ping_and_stops(tmp_path: Path) -> None:
    redis = start_redis(tmp_path)
    port = int(redis.value.rsplit(":", 1)[1].split("/")[0])
    try:
        assert redis.variable == "REDIS_URL"
        assert redis.value == f"redis://127.0.0.1:{port}/0"
        assert redis_ping(port)
        assert redis.alive()
    finally:
        redis.stop()

    assert not redis.alive()
    assert not redis_ping(port)
    assert not (tmp_path / "redis" / "dump.rdb").exists()
    assert (tmp_path / "logs" / "redis.log").stat().st_size > 0


def test_embedded_temporal_serves_keeps_its_file_and_stops(tmp_path: Path) -> None:
    temporal = start_temporal(port=free_port(), db_file=tmp_path / "temporal.db", log_dir=tmp_path)
    try:
        assert temporal.variable == "TEMPORAL_ADDRESS"
        assert temporal_ready(temporal.value)
        assert (tmp_path / "temporal.db").stat().st_size > 0
    finally:
        temporal.stop()

    assert not temporal.alive()
    assert not temporal_ready(temporal.value)


def test_embedded_postgres_serves_its_database(tmp_path: Path) -> None:
    postgres = start_postgres(tmp_path)
    try:
        assert postgres.variable == "DATABASE_URL"
        settings = dj_database_url.parse(postgres.value)
        assert settings["ENGINE"] == "django.db.backends.postgresql"
        assert settings["NAME"] == "fairsched"
        with psycopg.connect(postgres.value) as connection:
            row = connection.execute("SELECT current_database()").fetchone()
        assert row == ("fairsched",)
    finally:
        postgres.stop()

    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(postgres.value, connect_timeout=2)


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


def supervised_launcher(tmp_path: Path, *, sleep_seconds: int, worker: str = "sleeper") -> subprocess.Popen[str]:
    """The launcher with stand-in children (a web server and a sleeping `worker`) and external services."""
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://external/db",
        "REDIS_URL": "redis://external:6379/0",
        "TEMPORAL_ADDRESS": "external:7233",
        "FAIRSCHED_DATA_DIR": str(tmp_path),
        "PORT": str(free_port()),
    }
    return subprocess.Popen(
        [sys.executable, "-c", SUPERVISED_DRIVER, env["PORT"], str(sleep_seconds), worker],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(process: subprocess.Popen[str], marker: str) -> str:
    assert process.stdout is not None
    seen = ""
    for line in process.stdout:
        seen += line
        if marker in line:
            return seen
    raise AssertionError(f"{marker!r} never printed:\n{seen}")


def test_sigterm_stops_the_children_and_exits_0(tmp_path: Path) -> None:
    launcher = supervised_launcher(tmp_path, sleep_seconds=60)
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


def test_a_dying_child_stops_everything_and_exits_1(tmp_path: Path) -> None:
    launcher = supervised_launcher(tmp_path, sleep_seconds=2)

    output, _ = launcher.communicate(timeout=30)

    assert launcher.returncode == 1, output
    assert "launcher: sleeper exited (0); stopping everything" in output
    assert "launcher: web stopped" in output


def test_a_crashed_worker_is_started_again_until_it_crashes_too_often(tmp_path: Path) -> None:
    launcher = supervised_launcher(tmp_path, sleep_seconds=0, worker="celery")

    output, _ = launcher.communicate(timeout=60)

    assert output.count("launcher: celery exited (0); starting it again") == 5
    assert "launcher: celery exited (0); stopping everything" in output
    assert launcher.returncode == 1, output
    assert "launcher: web stopped" in output
