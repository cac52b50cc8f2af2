"""A live ASGI server (daphne) and headless Chromium for browser tests and the dashboard benchmark."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fairsched.devservices import ServiceError, free_port, port_accepts, wait_until
from tests.processes import running

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    try:
        wait_until(
            partial(port_accepts, port), what=f"daphne on {port}", timeout=timeout, alive=lambda: proc.poll() is None
        )
    except ServiceError as err:
        raise RuntimeError(f"{err}:\n{log.read_text()[-3000:]}") from err


@functools.cache
def collected_static() -> Path:
    """The static files collected once for this process, in a directory removed at its exit.

    `collectstatic` costs 3-4 s of CPU (it compresses every file) and its output depends on the checkout
    only, so the servers of one test run (nine in the suite) share one collection; each server only
    reads it."""
    root = Path(tempfile.mkdtemp(prefix="fairsched-static-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**os.environ, "STATIC_ROOT": str(root)},
        check=True,
    )
    return root


@contextmanager
def daphne(env: Mapping[str, str], *, port: int | None = None, log_to: Path | None = None) -> Iterator[str]:
    """Start daphne on a free port with `env` and the collected static files, yield its base URL, stop
    it. Its output goes to `log_to` when given (to read what it logged), else to a temporary file."""
    port = port or free_port()
    static_root = collected_static()
    with tempfile.TemporaryDirectory(prefix="fairsched-live-") as tmp:
        full_env = {**os.environ, **env, "STATIC_ROOT": str(static_root), "PYTHONUNBUFFERED": "1"}
        log = log_to or Path(tmp) / "daphne.log"
        with (
            log.open("wb") as out,
            running(
                [
                    str(Path(sys.executable).parent / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "fairsched.asgi:application",
                ],
                cwd=ROOT,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
            ) as proc,
        ):
            _wait_for_port(port, proc, log)
            yield f"http://127.0.0.1:{port}"


def launch_chromium(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def session_cookie(user: Any, base_url: str) -> dict[str, Any]:
    """Log `user` in through Django's test client and return its session cookie for the browser."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return {"name": name, "value": client.cookies[name].value, "url": base_url}
