"""Pytest plugin: every process a test starts, started and ended one way, and none left behind.

Enabled with `pytest_plugins = ["tests.processes"]` in the root conftest.

- `start(args, ...)` starts a process in a session (so a process group) of its own and records
  the group; `end(process)` ends the whole group: SIGTERM, then SIGKILL after a grace.
- `service(start_temporal(...))` records a service fairsched.devservices started.
- `running(args, ...)` is `start` and `end` around a block: the group is ended however the block leaves, a
  failure or pytest-timeout's timeout (its signal method raises in the test) included.
- At the session's end every recorded group that still has a live process is killed and named,
  and the session fails. Session fixtures (the Temporal dev server) are torn down before that, so
  a fixture that ends what it started is never reported. An `atexit` fallback kills what is left
  if pytest exits without finishing its session.
- SIGTERM to pytest (a CI job's timeout, `timeout`) interrupts the run as Ctrl-C does, so the
  session still finishes and ends what its tests started (by default SIGTERM ends the process at
  once and leaves its children running, their parent gone).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fairsched.devservices import EmbeddedService

GRACE_SECONDS = 10.0

# Process group id -> the process that leads it, for every group started here and not ended by `end`
# (a service's own `stop` leaves it here, without a live member: only those with one are reported).
_groups: dict[int, subprocess.Popen[Any]] = {}


def start(args: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(args, **popen)` in a session of its own, recorded until `end`."""
    process: subprocess.Popen[Any] = subprocess.Popen(list(args), start_new_session=True, **popen)
    _groups[process.pid] = process
    return process


def service(started: EmbeddedService) -> EmbeddedService:
    """Record the process of a service fairsched.devservices started (in a session of its own); its
    own `stop` ends it."""
    if started.process is not None:
        _groups[started.process.process.pid] = started.process.process
    return started


def end(process: subprocess.Popen[Any], grace: float = GRACE_SECONDS) -> int:
    """End the process's whole group: SIGTERM, SIGKILL to whatever is left after `grace` seconds;
    returns the leader's exit status."""
    _end_group(process.pid, grace)
    _groups.pop(process.pid, None)
    return process.wait()


@contextmanager
def running(args: Sequence[str], grace: float = GRACE_SECONDS, **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """`start` for the block, `end` however it leaves."""
    process = start(args, **popen)
    try:
        yield process
    finally:
        end(process, grace)


def members(group: int) -> list[int]:
    """The live (not zombie) processes of a process group, from /proc."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, group_id = fields[0], int(fields[2])
        if group_id == group and state != "Z":
            pids.append(int(entry.name))
    return pids


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def _end_group(group: int, grace: float) -> None:
    """1. SIGTERM to the group; 2. wait up to `grace` for its members to exit (reaping the leader, our
    child, so it does not linger as a zombie); 3. SIGKILL to what is left."""
    _signal_group(group, signal.SIGTERM)
    leader = _groups.get(group)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        if not members(group):
            return
        time.sleep(0.05)
    _signal_group(group, signal.SIGKILL)
    if leader is not None:
        leader.wait()


def _survivors() -> dict[int, list[int]]:
    """Recorded groups with a live member, each with those members' pids."""
    for process in list(_groups.values()):  # a copy: a load run's thread may end its process meanwhile
        process.poll()
    return {group: pids for group in list(_groups) if (pids := members(group))}


def _describe(group: int) -> str:
    args = _groups[group].args
    command = " ".join(str(arg) for arg in args) if isinstance(args, (list, tuple)) else str(args)
    return command[:200]


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"pytest got signal {signum}")


@pytest.hookimpl(trylast=True)  # after other plugins' own session-end stops (tests/tools/loadtest's runs)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    survivors = _survivors()
    if not survivors:
        return
    lines = [
        f"process group {group} ({_describe(group)}): pids {', '.join(map(str, pids))}"
        for group, pids in survivors.items()
    ]
    for group in survivors:
        _end_group(group, grace=2.0)
        _groups.pop(group)
    message = "Processes started by tests were still alive at the session's end (now killed):\n" + "\n".join(lines)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(message, red=True)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@atexit.register
def _kill_what_is_left() -> None:
    for group in list(_groups):
        _signal_group(group, signal.SIGKILL)
