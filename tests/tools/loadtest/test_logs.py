"""tests/tools/loadtest/logs.py: an xdist worker reads the log of a load run the controller runs, from
the run's folder, once the run has ended there."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.tools.loadtest.logs import RESULT, BackgroundRuns, RunsElsewhere, RunSpec, run_folder

SPEC = RunSpec(("--seconds", "5"), timeout=60)


def test_a_run_has_one_folder_whichever_process_names_it(tmp_path: Path) -> None:
    # The controller rebuilds the spec from JSON (the timeout a float); the worker has it from its module.
    assert run_folder(tmp_path, RunSpec.from_json(json.loads(json.dumps(SPEC.as_json())))) == run_folder(tmp_path, SPEC)
    assert run_folder(tmp_path, SPEC) != run_folder(tmp_path, RunSpec(("--seconds", "6"), timeout=60))


def test_a_worker_waits_for_the_runs_result_then_reads_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RunsElsewhere, "POLL_SECONDS", 0.01)
    folder = run_folder(tmp_path, SPEC)
    folder.mkdir()
    (folder / "stderr.log").write_text("")
    (folder / "events.json").write_text(json.dumps({"meta": {"budget": 2}}))

    def run_ends() -> None:
        (folder / RESULT).write_text(json.dumps({"returncode": 0, "timed_out": False, "cancelled": False}))

    ending = threading.Timer(0.2, run_ends)
    ending.start()
    assert RunsElsewhere(tmp_path).log(SPEC) == {"meta": {"budget": 2}}
    ending.join()


def test_a_worker_is_told_of_a_failed_or_cancelled_or_never_queued_run(tmp_path: Path) -> None:
    folder = run_folder(tmp_path, SPEC)
    folder.mkdir()
    (folder / "stderr.log").write_text("Traceback: the runner broke")
    (folder / RESULT).write_text(json.dumps({"returncode": 1, "timed_out": False, "cancelled": False}))
    with pytest.raises(AssertionError, match="the runner broke"):
        RunsElsewhere(tmp_path).log(SPEC)

    runs = BackgroundRuns(tmp_path / "controller")
    runs.stop()  # the session ends before the run starts: it is cancelled
    runs.queue(SPEC)
    with pytest.raises(AssertionError, match="cancelled"):
        RunsElsewhere(runs.root).log(SPEC)

    with pytest.raises(AssertionError, match="did not queue"):
        RunsElsewhere(tmp_path).log(RunSpec(("--seconds", "7"), timeout=60))
