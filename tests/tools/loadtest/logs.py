"""Event logs (the runner's `events.json`) for the tests: small synthetic ones, for the figures and
the report, and real ones from shortened runs of the runner, run in the background (see the
plugin tests/load_runs.py)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fairsched.devservices import REPO_ROOT
from tests.processes import end, start


@dataclass(frozen=True)
class RunSpec:
    """A shortened run: `python -m tools.loadtest.runner ARGS --drain-timeout 90`, stopped after
    `timeout` seconds."""

    args: tuple[str, ...]
    timeout: float

    def as_json(self) -> list[Any]:
        return [list(self.args), float(self.timeout)]

    @classmethod
    def from_json(cls, value: list[Any]) -> RunSpec:
        args, timeout = value
        return cls(tuple(args), float(timeout))


class LoadRuns(Protocol):
    """Where a test reads a load run's event log: `BackgroundRuns` or `RunsElsewhere`."""

    def log(self, spec: RunSpec) -> dict[str, Any]: ...


# A run's folder holds its output (`stderr.log`, `events.json`) and, once it has ended, its result.
RESULT = "result.json"


def run_folder(root: Path, spec: RunSpec) -> Path:
    """The folder of `spec`'s run under `root`: the same in every process of the session, so that an
    xdist worker finds the run the controller started for it."""
    digest = hashlib.sha256(json.dumps(spec.as_json()).encode()).hexdigest()[:12]
    return root / f"loadrun-{digest}"


def ended_log(folder: Path, spec: RunSpec) -> dict[str, Any]:
    """The event log of the run in `folder`, which has ended; fails with the runner's last output if
    it failed, took too long or never started."""
    result = json.loads((folder / RESULT).read_text())
    assert not result["cancelled"], "the load run was cancelled"
    stderr = (folder / "stderr.log").read_text(errors="replace")[-4000:]
    assert not result["timed_out"], f"the load run took over {spec.timeout:.0f} s:\n{stderr}"
    assert result["returncode"] == 0, stderr
    log: dict[str, Any] = json.loads((folder / "events.json").read_text())
    return log


class BackgroundRun:
    """One runner process, its output and event log in `folder`: `start()` it, `finish()` waits for
    it to end (stopping it on a timeout) and writes its result, `log()` waits for that and returns
    the event log."""

    def __init__(self, spec: RunSpec, folder: Path) -> None:
        self.spec = spec
        self.folder = folder
        self.out = folder / "events.json"
        self._process: subprocess.Popen[bytes] | None = None
        self._timed_out = False
        self._ended = threading.Event()

    def start(self) -> None:
        with (self.folder / "stderr.log").open("wb") as stderr:
            self._process = start(
                [sys.executable, "-m", "tools.loadtest.runner", *self.spec.args, "--drain-timeout", "90",
                 "--out", str(self.out)],
                cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip

    def finish(self) -> None:
        """Wait for the runner to end. On a timeout it gets SIGTERM, which it handles like Ctrl-C: it
        stops its children and services before leaving."""
        assert self._process is not None
        try:
            self._process.wait(self.spec.timeout)
        except subprocess.TimeoutExpired:
            self._timed_out = True
            self.stop()
        finally:
            end(self._process, grace=0)  # what is left of its group once it has exited
            self._write_result(returncode=self._process.returncode)

    def cancel(self) -> None:
        """End a run that never started (its `log()` fails)."""
        self._write_result(returncode=None)

    def _write_result(self, *, returncode: int | None) -> None:
        """The result, written whole (renamed into place) so that another process never reads half of it."""
        result = {"returncode": returncode, "timed_out": self._timed_out, "cancelled": self._process is None}
        partial = self.folder / f"{RESULT}.partial"
        partial.write_text(json.dumps(result))
        partial.replace(self.folder / RESULT)
        self._ended.set()

    def stop(self) -> None:
        """SIGTERM the runner if it still runs, and wait for it to leave (killed after 60 s)."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(60)
        end(process, grace=0)

    def log(self) -> dict[str, Any]:
        """The event log, once the run has ended; fails with the runner's last output if it failed."""
        self._ended.wait()
        return ended_log(self.folder, self.spec)


class BackgroundRuns:
    """The load runs a session needs, run one after another in a daemon thread from the moment they
    are queued, so that they run while the rest of the suite does (a run mostly waits: for its
    services, for beat's passes, for the demo workflows' sleeps). One at a time, so that two runs
    never compete for the machine; in the order queued, the order their tests come in. Each run's
    folder is `run_folder(root, spec)`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs: dict[RunSpec, BackgroundRun] = {}
        self._queue: list[BackgroundRun] = []
        self._lock = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def queue(self, spec: RunSpec) -> BackgroundRun:
        """The run of `spec`, queued now unless it already was."""
        with self._lock:
            if spec not in self.runs:
                folder = run_folder(self.root, spec)
                folder.mkdir(parents=True)
                run = BackgroundRun(spec, folder)
                self.runs[spec] = run
                self._queue.append(run)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="load-runs", daemon=True)
                    self._thread.start()
            return self.runs[spec]

    def log(self, spec: RunSpec) -> dict[str, Any]:
        """The event log of `spec`'s run (queued now if it was not), once it has ended."""
        return self.queue(spec).log()

    def _work(self) -> None:
        while True:
            # Started under the lock, so that `stop` either sees the process or keeps it from starting.
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                run = self._queue.pop(0)
                if self._stopping:
                    run.cancel()
                    continue
                run.start()
            run.finish()

    def stop(self) -> None:
        """Start nothing more, stop the run under way and wait for it."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        for run in self.runs.values():
            run.stop()
        if thread is not None:
            thread.join(90)


class RunsElsewhere:
    """The load runs of an xdist session, run by the controller (`BackgroundRuns` under `root`): an
    xdist worker reads a run's log from its folder once the run has ended there."""

    POLL_SECONDS = 0.5

    def __init__(self, root: Path) -> None:
        self.root = root

    def log(self, spec: RunSpec) -> dict[str, Any]:
        """The event log of `spec`'s run, once it has ended (the test's timeout bounds the wait)."""
        folder = run_folder(self.root, spec)
        assert folder.is_dir(), f"the controller did not queue the load run {spec}"
        while not (folder / RESULT).exists():
            time.sleep(self.POLL_SECONDS)
        return ended_log(folder, spec)


def chart(
    chart_id: int, org: str, submitted: float, *, state: str = "succeeded", finished: float | None = None,
    runs: list[tuple[str, float | None, float | None]] | None = None, cost: int = 1,
    eta_enqueue: dict[str, Any] | None = None, eta_start: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    runs = runs if runs is not None else [("completed", submitted, finished)]
    return {
        "id": chart_id,
        "org": org,
        "external_id": f"{org}-{chart_id}",
        "workflow": "standard",
        "cost": cost,
        "planned_duration": 1.0,
        "planned_submit": submitted,
        "submitted": submitted,
        "state": state,
        "attempt": len(runs),
        "started": runs[-1][1] if runs else None,
        "finished": finished,
        "eta_enqueue": eta_enqueue,
        "eta_start": eta_start,
        "runs": [
            {"attempt": i + 1, "workflow_id": f"chart-{chart_id}-a{i + 1}", "status": s, "start": a, "close": b}
            for i, (s, a, b) in enumerate(runs)
        ],
    }


def lifecycle(chart_id: int, submitted: float, start: float, finish: float, end: str = "succeeded") -> list[list[Any]]:
    return [
        [chart_id, submitted, "", "queued"],
        [chart_id, start, "queued", "dispatching"],
        [chart_id, start + 0.01, "dispatching", "running"],
        [chart_id, finish, "running", end],
    ]


def log_of(charts: list[dict[str, Any]], transitions: list[list[Any]], **meta: Any) -> dict[str, Any]:
    return {
        "meta": {"budget": 2, "ended": 20.0, "default_duration": 2.0, "planned_charts": len(charts), **meta},
        "orgs": [
            {"slug": "big", "kind": "backfill", "workflow": "standard", "weight": 1, "held_until": None},
            {"slug": "small", "kind": "small", "workflow": "standard", "weight": 1, "held_until": None},
        ],
        "holds": [],
        "pauses": [],
        "faults": [],
        "charts": charts,
        "transitions": sorted(transitions, key=lambda t: t[1]),
        "temporal_unknown_workflows": [],
    }
