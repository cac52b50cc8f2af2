"""The processes plugin (tests/processes.py): a process a test leaves alive fails the run and is killed;
a timed-out test's process is ended with its whole group."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import end, members, start

ROOT = Path(__file__).resolve().parents[1]

# A child that starts a grandchild (in its group) and writes both pids, then sleeps.
FAMILY = (
    "import os, subprocess, sys, time; "
    "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {grandchild.pid}'); "
    "time.sleep(600)"
)


def run_inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    pytester.makepyfile(test_inner=source)
    return pytester.runpytest_subprocess("-p", "tests.processes", "-p", "no:django", "-p", "no:cacheprovider")


def family(pytester: pytest.Pytester) -> list[int]:
    pids_file = pytester.path / "pids"
    deadline = time.monotonic() + 30
    while not (pids_file.exists() and len(pids_file.read_text().split()) == 2):
        assert time.monotonic() < deadline, "the inner test never wrote its pids"
        time.sleep(0.05)
    return [int(pid) for pid in pids_file.read_text().split()]


def alive(pid: int) -> bool:
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


@pytest.mark.slow
def test_a_process_left_alive_fails_the_run_and_is_killed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_inner(
        pytester,
        monkeypatch,
        f"""
import os, sys, time
from tests.processes import start

def test_leaves_its_process_behind():
    start([sys.executable, "-c", {FAMILY!r}, "pids"])
    while not os.path.exists("pids"):
        time.sleep(0.05)
""",
    )

    child, grandchild = family(pytester)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*still alive at the session's end*", f"*process group {child}*{grandchild}*"])
    assert not alive(child)
    assert not alive(grandchild)
    assert members(child) == []


@pytest.mark.slow
def test_a_timed_out_tests_process_group_is_ended(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_inner(
        pytester,
        monkeypatch,
        f"""
import sys, time
import pytest
from tests.processes import running

@pytest.mark.timeout(5, method="signal")
def test_hangs():
    with running([sys.executable, "-c", {FAMILY!r}, "pids"]):
        time.sleep(600)
""",
    )

    child, grandchild = family(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout*"])
    result.stdout.no_fnmatch_line("*still alive at the session's end*")
    assert not alive(child)
    assert not alive(grandchild)


@pytest.mark.slow
def test_a_run_ended_by_sigterm_ends_what_its_tests_started(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI job's timeout or a `timeout` command sends SIGTERM to pytest: the processes its tests
    started go with it (found left behind: a Temporal dev server and two daphnes, their parent gone)."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    pytester.makepyfile(
        test_inner=f"""
import sys, time
from tests.processes import start

def test_waits_with_its_process():
    start([sys.executable, "-c", {FAMILY!r}, "pids"])
    time.sleep(600)
"""
    )
    inner = start(
        [sys.executable, "-m", "pytest", "-p", "tests.processes", "-p", "no:django", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        pids = family(pytester)
        inner.send_signal(signal.SIGTERM)  # to pytest alone, as `timeout` does
        inner.wait(timeout=60)
    finally:
        end(inner)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"left alive after pytest got SIGTERM: {[p for p in pids if alive(p)]}"
        time.sleep(0.05)
