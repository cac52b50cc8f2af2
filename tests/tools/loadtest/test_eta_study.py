"""`tools.loadtest.eta_study` on a small synthetic log: each ETA's parts add up to its error, and an
ETA whose span to its chart's finish crosses a fault's disruption is told apart."""

from __future__ import annotations

import pytest

from tests.tools.loadtest.logs import chart, lifecycle, log_of
from tools.loadtest.eta_study import loop_lags, scored_etas


def test_the_parts_add_up_and_faults_are_told_apart() -> None:
    # Chart 1: ETA at 1 says start 3, finish 8; it started at 4 and finished at 10 (left 9 s): the
    # wait's part (3 - 4) / 9, the duration's (5 - 6) / 9. Chart 2's ETA at 12 spans the fault at 14.
    charts = [
        chart(1, "a", 0, finished=10, runs=[("completed", 4, 10)],
              eta_enqueue={"at": 1, "eta": 8, "low": 6, "high": 12, "start": 3}),
        chart(2, "b", 12, finished=20, runs=[("completed", 16, 20)],
              eta_enqueue={"at": 12, "eta": 19, "low": 17, "high": 21, "start": 15}),
    ]  # fmt: skip
    log = log_of(charts, lifecycle(1, 0, 3.9, 10.2) + lifecycle(2, 12, 15.8, 20.5), seconds=20.0)
    log["faults"] = [{"kind": "redis", "at": 14.0, "restored": 15.0, "detail": ""}]

    first, second = sorted(scored_etas(log), key=lambda s: s.chart["id"])

    assert first.parts == pytest.approx(((3 - 4) / 9, (5 - 6) / 9))
    assert sum(first.parts or ()) == pytest.approx(first.error)
    assert (first.fault, second.fault) == (False, True)
    lags = {row[0]: row for row in loop_lags(log)}
    assert lags["close to settle"][2] == "0.35"  # 0.2 and 0.5 s after the closes
    assert lags["claim to start"][2] == "0.15"  # 0.1 and 0.2 s
