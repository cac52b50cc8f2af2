"""A shortened multi-instance run: two web processes, two Celery workers each with beat, two Temporal
workers, the dispatcher killed -9 mid-pass twice. Nothing lost, nothing run twice, the budget kept,
every kill followed by another process taking the lock, and the status read served through one and
two web processes."""

from __future__ import annotations

import pytest

from tests.tools.loadtest.logs import LoadRuns, RunSpec
from tools.loadtest.multirun import summary

pytestmark = [pytest.mark.slow, pytest.mark.temporal]

SECONDS = 30
API_REQUESTS = 8  # per client, of 50: enough to see both setups serve, short enough for make test
RUN_TIMEOUT_SECONDS = 480  # beside the rest of the suite (tests/load_runs.py): room for a busy machine
LOAD_RUN = RunSpec(
    ("--seconds", str(SECONDS), "--faults", "", "--celery-workers", "2", "--temporal-workers", "2", "--web", "2",
     "--leader-kills", "2", "--api-requests", str(API_REQUESTS)),
    timeout=RUN_TIMEOUT_SECONDS,
)  # fmt: skip


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS + 90)
def test_two_of_everything_survive_leader_kills(load_runs: LoadRuns) -> None:
    """The run started in the background (see tests/load_runs.py)."""
    log = load_runs.log(LOAD_RUN)

    lines, passed = summary(log)
    assert passed, "\n".join(lines)
    kills = log["leader_kills"]
    assert len(kills) == 2
    caught = [kill for kill in kills if kill["holder"]]
    assert caught, "no dispatcher was caught holding the lock"
    assert all(kill["failover"] is not None and kill["next_leader"] != kill["holder"] for kill in caught)
    assert [run["web_processes"] for run in log["api"]] == [1, 2]
    assert all(run["errors"] == 0 and run["requests"] == 50 * API_REQUESTS for run in log["api"])
