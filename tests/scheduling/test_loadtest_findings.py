"""Live-loop defects found by the hostile load run, each pinned by a minimal test.

Each was fixed; the tests stay so that the defect cannot come back.
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt
import pytest
from django.utils import timezone

from charts.models import Chart, ChartState
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from scheduling import core, packed_rows, snapshot
from tests.factories import OrgFactory, WorkflowFactory

pytestmark = pytest.mark.django_db


def test_a_chart_claimed_while_the_snapshot_is_read_is_not_both_waiting_and_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workflow = WorkflowFactory(name="race")
    ((chart, _),) = chart_submit_bulk(
        org=OrgFactory(slug="race"), items=[ChartRequest("race", "c0")], actor=Actor("t", staff=True)
    )
    read_charts = packed_rows.read

    def a_dispatcher_claims_the_chart_meanwhile(*args: Any) -> list[npt.NDArray[Any]]:
        # Called once the snapshot has begun, as the charts' statement is about to run.
        Chart.objects.filter(pk=chart.pk).update(
            state=ChartState.DISPATCHING, attempt=1, cost=workflow.default_cost, claimed_at=timezone.now()
        )
        return read_charts(*args)

    monkeypatch.setattr(packed_rows, "read", a_dispatcher_claims_the_chart_meanwhile)
    scenario = snapshot.load_snapshot().scenario
    waiting = set(core.QueueColumns.of(scenario.queued).id)
    in_flight = {running.id for running in scenario.running}
    assert waiting & in_flight == set()
    assert in_flight == {chart.pk}  # the one statement saw the claim
