"""Pytest plugin: the shortened load runs start in the background as soon as the tests are collected.

Enabled with `pytest_plugins = ["tests.load_runs"]` in the root conftest (a plugin, not the folder's
conftest, because under xdist the controller runs the loads, and the controller collects nothing, so
loads no conftest below the root).

A test module that needs one declares it as `LOAD_RUN = RunSpec(...)` and reads its event log with
`load_runs.log(LOAD_RUN)`. Once the tests are collected (and deselected), the run of every selected
module is queued (`BackgroundRuns`): they run one at a time, each on its own private services, while
the rest of the suite runs, and the module's tests wait only for what is left of it.

- In one process the session runs them itself, in a thread.
- On xdist (`make test`) the controller runs them, from the moment the first worker has collected:
  that worker writes the runs its selected modules declare to the session's folder
  (`wanted-<worker>.json`), the controller queues them, and a worker given such a module reads the
  log from the run's folder once the run has ended there (`RunsElsewhere`). So the runs go on while
  both workers run other files, and tests/file_order.py gives these modules out last.

At the end of the session (`-x`, Ctrl-C included) a run still under way is stopped; the runs' output
and logs are kept in a `loadruns-*` temporary folder when the session failed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.tools.loadtest.logs import BackgroundRuns, LoadRuns, RunsElsewhere, RunSpec

RUNS = pytest.StashKey[BackgroundRuns]()
QUEUED = pytest.StashKey[bool]()
ROOT_KEY = "load_runs_root"


def _runs(config: pytest.Config) -> BackgroundRuns:
    if RUNS not in config.stash:
        config.stash[RUNS] = BackgroundRuns(Path(tempfile.mkdtemp(prefix="loadruns-")))
    return config.stash[RUNS]


def wanted(items: list[pytest.Item]) -> list[RunSpec]:
    """The runs the modules of `items` declare, each once, in the order their tests come."""
    specs: list[RunSpec] = []
    for item in items:
        spec = getattr(getattr(item, "module", None), "LOAD_RUN", None)
        if spec is not None and spec not in specs:
            specs.append(spec)
    return specs


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: every worker learns the session's folder of runs."""
    node.workerinput[ROOT_KEY] = str(_runs(node.config).root)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which tells the controller the collection is done
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly:
        return
    specs = wanted(session.items)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        for spec in specs:
            _runs(config).queue(spec)
    elif ROOT_KEY in workerinput:
        wanted_file = Path(workerinput[ROOT_KEY]) / f"wanted-{workerinput['workerid']}.json"
        wanted_file.write_text(json.dumps([spec.as_json() for spec in specs]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Any) -> None:
    """Controller: queue the runs the first worker to finish collecting wants (they all collect the same)."""
    config = node.config
    if config.option.collectonly or QUEUED in config.stash:
        return
    config.stash[QUEUED] = True
    runs = _runs(config)
    wanted_file = runs.root / f"wanted-{node.workerinput['workerid']}.json"
    for spec in json.loads(wanted_file.read_text()):
        runs.queue(RunSpec.from_json(spec))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if RUNS not in session.config.stash:
        return
    runs = session.config.stash[RUNS]
    runs.stop()
    if exitstatus == 0 or not runs.runs:
        shutil.rmtree(runs.root, ignore_errors=True)


@pytest.fixture(scope="session")
def load_runs(request: pytest.FixtureRequest) -> LoadRuns:
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is not None and ROOT_KEY in workerinput:
        return RunsElsewhere(Path(workerinput[ROOT_KEY]))
    return _runs(request.config)
