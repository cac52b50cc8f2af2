"""The shortened load runs start in the background as soon as the session has collected its tests.

A test module that needs one declares it as `LOAD_RUN = RunSpec(...)` and reads its event log with
`load_runs.log(LOAD_RUN)`. Once the tests are collected (and deselected), the run of every selected
module is queued (`BackgroundRuns`): they run one at a time, each on its own private services, while
the rest of the suite runs, and the module's tests wait only for what is left of it. Collected on
their own (`pytest tests/tools/loadtest/test_runner.py`), they start at once as before. On an xdist
worker (`make test`) a run starts when its module's first test asks for it: every worker collects
every test, and only the run of a module the worker is given is wanted there.

At the end of the session (`-x`, Ctrl-C included) a run still under way is stopped; the runs' output
and logs are kept in a `loadruns-*` temporary folder when the session failed.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.tools.loadtest.logs import BackgroundRuns

RUNS = pytest.StashKey[BackgroundRuns]()


def _runs(session: pytest.Session) -> BackgroundRuns:
    if RUNS not in session.stash:
        session.stash[RUNS] = BackgroundRuns(Path(tempfile.mkdtemp(prefix="loadruns-")))
    return session.stash[RUNS]


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or hasattr(session.config, "workerinput"):
        return
    for item in session.items:
        spec = getattr(getattr(item, "module", None), "LOAD_RUN", None)
        if spec is not None:
            _runs(session).queue(spec)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if RUNS not in session.stash:
        return
    runs = session.stash[RUNS]
    runs.stop()
    if exitstatus == 0:
        shutil.rmtree(runs.root, ignore_errors=True)


@pytest.fixture(scope="session")
def load_runs(request: pytest.FixtureRequest) -> BackgroundRuns:
    return _runs(request.session)
