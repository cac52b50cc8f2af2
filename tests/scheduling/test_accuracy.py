"""ETA accuracy measured in production, on PostgreSQL through the real passes (Temporal faked as in
test_reconcile): each chart's promise at enqueue (its first plan) and at start (the plan its claim
was made by), scored at its success, counted in the metrics, and summed up for the dashboard."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import Chart, ChartPlan, ChartPromise, ChartState
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from orgs.services import org_hold
from scheduling import dispatch as dispatch_module
from scheduling import metrics
from scheduling import reconcile as reconcile_module
from scheduling.accuracy import finish_scores
from scheduling.core.accuracy import MIN_HORIZON, eta_outcome
from scheduling.dispatch import dispatch_run
from scheduling.models import QueueSample
from scheduling.reconcile import duration_record, reconcile_run
from scheduling.replan import FIRST_PLAN_MARGIN, plan_refresh
from scheduling.selectors import eta_accuracy
from scheduling.temporal.client import WorkflowOutcome
from tests.conftest import Tenants
from tests.factories import ChartFactory
from tests.scheduling.test_reconcile import FakeTemporal, counters

pytestmark = pytest.mark.django_db
ACTOR = Actor("user:test", staff=True)


@pytest.fixture
def temporal(monkeypatch: pytest.MonkeyPatch, announced: Any) -> FakeTemporal:
    """test_reconcile's fake Temporal: started workflows run until the test closes them."""
    fake = FakeTemporal()
    monkeypatch.setattr(dispatch_module, "start_chart_workflow", fake.start)
    monkeypatch.setattr(reconcile_module, "describe_workflow", fake.describe)
    monkeypatch.setattr(reconcile_module, "list_open_workflow_ids", lambda: set())
    return fake


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    client = metrics._redis()
    for key in client.scan_iter(f"{metrics.PREFIX}*"):
        client.delete(key)


def submit(tenants: Tenants, count: int, *, org: Any = None) -> list[Chart]:
    org = org or tenants.org_a
    items = [ChartRequest(tenants.workflow.name, f"{org.slug}-{i}") for i in range(count)]
    return [chart for chart, _ in chart_submit_bulk(org=org, items=items, actor=ACTOR)]


def learned(tenants: Tenants) -> None:
    for seconds in (40, 60, 90):
        duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=seconds)


# The rule ------------------------------------------------------------------------------------------


def test_the_error_is_relative_to_the_time_left_when_predicted() -> None:
    early = eta_outcome(predicted_at=100, eta=200, low=150, high=260, finished=250)
    assert (early.error, early.late, early.in_band) == (50 / 150, 50, True)
    outside = eta_outcome(predicted_at=100, eta=200, low=150, high=240, finished=250)
    assert not outside.in_band
    # A prediction made as the chart finished weighs its error against at least MIN_HORIZON.
    assert eta_outcome(predicted_at=100, eta=99, low=99, high=99, finished=100).error == 1 / MIN_HORIZON
    # A band without width holds only a finish exactly at it.
    assert eta_outcome(predicted_at=0, eta=10, low=10, high=10, finished=10).in_band


# Recording the promises ----------------------------------------------------------------------------


def promises(charts: list[Chart]) -> dict[int, ChartPromise]:
    return {promise.chart_id: promise for promise in ChartPromise.objects.filter(chart__in=charts)}


def test_the_first_plan_after_submit_is_recorded_once(tenants: Tenants) -> None:
    learned(tenants)
    charts = submit(tenants, 3)
    first = plan_refresh()
    plans = {plan.chart_id: plan for plan in ChartPlan.objects.all()}
    recorded = promises(charts)
    assert recorded.keys() == {chart.pk for chart in charts}
    planned_at = {promise.planned_at for promise in recorded.values()}
    assert planned_at == {QueueSample.objects.get().at}
    for chart_id, promise in recorded.items():
        plan = plans[chart_id]
        assert (promise.eta, promise.eta_low, promise.eta_high) == (plan.eta, plan.eta_low, plan.eta_high)
        assert promise.eta_low < promise.eta < promise.eta_high  # type: ignore[operator]

    later = submit(tenants, 1, org=tenants.org_b)
    plan_refresh(now=timezone.now() + timedelta(seconds=30))

    again = promises(charts)
    for chart_id, promise in recorded.items():
        assert (again[chart_id].planned_at, again[chart_id].eta) == (promise.planned_at, promise.eta)
    newcomer = promises(later)[later[0].pk]
    assert newcomer.planned_at > planned_at.pop()
    assert newcomer.eta == ChartPlan.objects.get(pk=later[0].pk).eta
    assert first.ordered == 3


def test_a_submission_the_previous_replan_did_not_see_yet_is_recorded(tenants: Tenants) -> None:
    """A chart whose transaction committed after the previous replan read the queue has a `created_at`
    before that replan: it counts within FIRST_PLAN_MARGIN. One older than that that no replan
    recorded (waiting since before the release that records promises) gets none."""
    plan_refresh()
    previous = QueueSample.objects.get().at
    unseen = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, created_at=previous - timedelta(seconds=20))
    old = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, created_at=previous - FIRST_PLAN_MARGIN - timedelta(seconds=1)
    )
    plan_refresh()
    assert set(promises([unseen, old])) == {unseen.pk}


def test_a_chart_whose_first_plan_has_no_eta_is_recorded_without_one(tenants: Tenants) -> None:
    org_hold(org=tenants.org_b, actor=ACTOR, reason="test")
    (held,) = submit(tenants, 1, org=tenants.org_b)
    plan_refresh()
    promise = promises([held])[held.pk]
    assert promise.eta is None
    assert finish_scores(Chart.objects.get(pk=held.pk), finished=timezone.now()) == ({}, [])


def test_a_claim_records_the_eta_of_the_plan_it_was_made_by(tenants: Tenants, temporal: FakeTemporal) -> None:
    learned(tenants)
    (chart,) = submit(tenants, 1)
    plan_refresh()
    plan = ChartPlan.objects.get(pk=chart.pk)
    assert chart.pk in dispatch_run().started
    claimed = Chart.objects.get(pk=chart.pk)
    assert (claimed.eta_at_start, claimed.eta_low_at_start, claimed.eta_high_at_start) == (
        plan.eta, plan.eta_low, plan.eta_high,
    )  # fmt: skip
    assert claimed.claimed_at is not None


# Scoring at the finish -----------------------------------------------------------------------------


def complete(temporal: FakeTemporal, chart: Chart, *, finished: datetime) -> Chart:
    """The chart's workflow completes at `finished`; reconcile records it."""
    workflow_id = Chart.objects.get(pk=chart.pk).temporal_workflow_id
    running = temporal.outcomes[workflow_id]
    temporal.outcomes[workflow_id] = WorkflowOutcome("completed", running.run_id, running.start_time, finished)
    reconcile_run()
    return Chart.objects.get(pk=chart.pk)


def test_a_success_scores_both_promises_and_counts_them(tenants: Tenants, temporal: FakeTemporal) -> None:
    learned(tenants)
    (chart,) = submit(tenants, 1)
    plan_refresh()
    dispatch_run()
    enqueue = ChartPromise.objects.get(pk=chart.pk)
    # It finishes inside its band at enqueue, between its ETA and the band's late end.
    finished_in_band = enqueue.eta + (enqueue.eta_high - enqueue.eta) / 2  # type: ignore[operator]
    done = complete(temporal, chart, finished=finished_in_band)

    assert done.state == ChartState.SUCCEEDED
    left = (finished_in_band - enqueue.planned_at).total_seconds()
    assert done.eta_error_at_enqueue == pytest.approx((finished_in_band - enqueue.eta).total_seconds() / left)
    assert done.eta_in_band_at_enqueue is True
    left_at_start = (finished_in_band - done.claimed_at).total_seconds()
    assert done.eta_error_at_start == pytest.approx(
        abs((finished_in_band - done.eta_at_start).total_seconds()) / left_at_start
    )
    assert done.eta_in_band_at_start is (done.eta_low_at_start <= finished_in_band <= done.eta_high_at_start)

    assert counters("eta_in_band") == {
        f"acme|enqueue|{'true'}": 1,
        f"acme|start|{str(done.eta_in_band_at_start).lower()}": 1,
    }
    histogram = metrics._redis().hgetall(f"{metrics.PREFIX}hist:eta_error_ratio")
    fields = {key.decode(): float(value) for key, value in histogram.items()}  # type: ignore[union-attr]
    assert fields["acme|enqueue|count"] == 1
    assert fields["acme|start|count"] == 1
    assert fields["acme|enqueue|sum"] == pytest.approx(done.eta_error_at_enqueue)

    staff = Client()
    staff.force_login(tenants.staff)
    page = staff.get("/metrics").content.decode()
    assert 'fairsched_eta_in_band_total{at="enqueue",in_band="true",org="acme"} 1.0' in page
    assert 'fairsched_eta_error_ratio_count{at="enqueue",org="acme"} 1.0' in page
    assert 'fairsched_eta_error_ratio_bucket{at="start",le="+Inf",org="acme"} 1.0' in page


def test_failures_are_not_scored(tenants: Tenants, temporal: FakeTemporal) -> None:
    learned(tenants)
    (chart,) = submit(tenants, 1)
    plan_refresh()
    dispatch_run()
    temporal.close(Chart.objects.get(pk=chart.pk).temporal_workflow_id, "failed", failure_message="boom")
    reconcile_run()
    failed = Chart.objects.get(pk=chart.pk)
    assert failed.state == ChartState.RETRY_WAIT
    assert failed.eta_error_at_enqueue is None
    assert failed.eta_error_at_start is None
    assert counters("eta_in_band") == {}


# The dashboard's panel -----------------------------------------------------------------------------


def scored(tenants: Tenants, *, ago: float, enqueue: tuple[float, bool] | None, start: tuple[float, bool] | None,
           state: str = ChartState.SUCCEEDED) -> Chart:  # fmt: skip
    return ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=state,
        finished_at=timezone.now() - timedelta(seconds=ago),
        eta_error_at_enqueue=enqueue and enqueue[0], eta_in_band_at_enqueue=enqueue and enqueue[1],
        eta_error_at_start=start and start[0], eta_in_band_at_start=start and start[1],
    )  # fmt: skip


def test_the_dashboard_shows_the_last_hour_s_median_error_and_coverage(tenants: Tenants) -> None:
    scored(tenants, ago=60, enqueue=(0.1, True), start=(0.05, True))
    scored(tenants, ago=600, enqueue=(0.5, False), start=(0.2, False))
    scored(tenants, ago=3000, enqueue=(0.2, True), start=None)  # started before the release: no start promise
    scored(tenants, ago=3700, enqueue=(0.9, False), start=(0.9, False))  # over an hour ago
    scored(tenants, ago=30, enqueue=(0.9, False), start=(0.9, False), state=ChartState.FAILED)

    accuracy = eta_accuracy()

    assert accuracy["enqueue"] == {"charts": 3, "median_error": pytest.approx(0.2), "in_band": pytest.approx(2 / 3)}
    assert accuracy["start"] == {"charts": 2, "median_error": pytest.approx(0.125), "in_band": pytest.approx(0.5)}

    staff = Client()
    staff.force_login(tenants.staff)
    header = staff.get("/dashboard/partials/?names=summary").content.decode()
    assert '<b id="accuracy-enqueue">20% off, 67% in band (3)</b>' in header
    assert '<b id="accuracy-start">12% off, 50% in band (2)</b>' in header


def test_the_panel_says_so_when_nothing_finished_in_the_last_hour(tenants: Tenants) -> None:
    assert eta_accuracy()["enqueue"] == {"charts": 0, "median_error": None, "in_band": None}
    staff = Client()
    staff.force_login(tenants.staff)
    header = staff.get("/dashboard/partials/?names=summary").content.decode()
    assert '<b id="accuracy-enqueue">no finished chart</b>' in header
