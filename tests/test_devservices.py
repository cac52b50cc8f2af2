"""The embedded services started for real, and the pieces around them (ports, programs, waiting,
child processes) that the launcher, the test fixtures and the load runner share."""

from __future__ import annotations

import socket
from pathlib import Path

import dj_database_url
import psycopg
import pytest

from fairsched.devservices import (
    ChildProcess,
    ServiceError,
    executable,
    free_port,
    port_accepts,
    port_is_free,
    redis_ping,
    start_embedded,
    start_postgres,
    start_redis,
    start_temporal,
    temporal_ready,
    wait_until,
)
from tests.processes import service


def test_free_port_is_bindable_until_taken() -> None:
    port = free_port()

    assert 1024 <= port <= 65535
    assert port_is_free(port)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert not port_is_free(port)


def test_a_port_accepts_once_something_listens() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
        assert not port_accepts(port)
        holder.listen()
        assert port_accepts(port)


def test_executables_come_from_the_environment() -> None:
    assert Path(executable("temporal")).is_file()
    with pytest.raises(ServiceError, match="no-such-program"):
        executable("no-such-program")


def test_wait_until_fails_when_the_process_dies_or_time_runs_out() -> None:
    with pytest.raises(ServiceError, match="exited while starting"):
        wait_until(lambda: False, what="thing", alive=lambda: False)
    with pytest.raises(ServiceError, match="not ready after"):
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
    redis = service(start_redis(tmp_path))
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
    temporal = service(start_temporal(port=free_port(), db_file=tmp_path / "temporal.db", log_dir=tmp_path))
    try:
        assert temporal.variable == "TEMPORAL_ADDRESS"
        assert temporal_ready(temporal.value)
        assert (tmp_path / "temporal.db").stat().st_size > 0
    finally:
        temporal.stop()

    assert not temporal.alive()
    assert not temporal_ready(temporal.value)


def test_embedded_postgres_serves_its_database(tmp_path: Path) -> None:
    postgres = service(start_postgres(tmp_path))
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


def test_only_the_three_service_variables_can_be_embedded(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no embedded service for CELERY_BROKER_URL"):
        start_embedded("CELERY_BROKER_URL", tmp_path)
