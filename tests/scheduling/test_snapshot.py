"""The snapshot's dispatch view (what the dispatch pass reads besides the order) and the one meaning of
a retry, shared by the replan's scenario and the dispatch pass."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from charts.models import Chart, ChartState, is_retry
from orgs.models import ProviderPause, WorkflowCost
from scheduling.snapshot import (
    Epoch,
    InFlightRun,
    chart_ids,
    chart_key,
    load_dispatch_view,
    load_snapshot,
    to_seconds,
)
from tests.conftest import Tenants
from tests.factories import ChartFactory, OrgFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("state", "attempt", "retry"),
    [
        (ChartState.QUEUED, 0, False),  # never ran: its next run is its first
        (ChartState.QUEUED, 1, True),  # a throttle gives its attempt back, a failure does not
        (ChartState.RETRY_WAIT, 1, True),
        (ChartState.PAUSED, 2, True),
        (ChartState.DISPATCHING, 1, False),  # claimed: the attempt in flight is counted
        (ChartState.RUNNING, 1, False),
        (ChartState.RUNNING, 2, True),
    ],
)
def test_a_retry_is_a_run_after_the_first_attempt(state: str, attempt: int, retry: bool) -> None:
    assert is_retry(state=state, attempt=attempt) is retry


def test_the_dispatch_view_reads_orgs_in_flight_runs_and_pauses(tenants: Tenants) -> None:
    held = OrgFactory(slug="held", weight=0, max_concurrency=3)
    heavy = WorkflowFactory(name="heavy", default_cost=4)
    WorkflowCost.objects.create(org=tenants.org_b, workflow=heavy, cost=7)
    ChartFactory(org=tenants.org_a, workflow=heavy, state=ChartState.RUNNING, attempt=2, cost=5)
    ChartFactory(org=tenants.org_b, workflow=heavy, state=ChartState.DISPATCHING, attempt=1)  # no cost recorded
    ChartFactory(org=tenants.org_b, workflow=heavy, state=ChartState.QUEUED, attempt=1)  # not in flight
    now = timezone.now()
    until = now + timedelta(minutes=5)
    tenants.workflow.provider = ProviderFactory(slug="llm")
    tenants.workflow.save()
    ProviderPause.objects.create(provider=tenants.workflow.provider, org=tenants.org_a, until=until)

    view = load_dispatch_view(now=now)

    assert view.now == now
    assert view.instant == to_seconds(now)
    assert {org.id: (org.weight, org.max_concurrency) for org in view.orgs} == {
        tenants.org_a.pk: (2, None),
        tenants.org_b.pk: (1, None),
        held.pk: (0, 3),
    }
    assert view.held == {held.pk}
    assert sorted(view.in_flight, key=lambda run: run.org_id) == [
        InFlightRun(tenants.org_a.pk, 5, True),
        InFlightRun(tenants.org_b.pk, 7, False),  # its org's override, as a new claim would hold
    ]
    backoff = now + timedelta(minutes=1)
    paused = view.candidate(
        org_id=tenants.org_a.pk,
        workflow_id=tenants.workflow.pk,
        available_at=backoff,
        state=ChartState.RETRY_WAIT,
        attempt=1,
    )
    assert (paused.cost, paused.retry) == (1, True)
    assert paused.own_available_at == to_seconds(backoff)
    assert paused.available_at == pytest.approx(to_seconds(until))  # the provider's pause lasts longer
    other = view.candidate(
        org_id=tenants.org_b.pk, workflow_id=tenants.workflow.pk, available_at=None, state=ChartState.QUEUED, attempt=0
    )
    assert (other.cost, other.own_available_at, other.available_at, other.retry) == (1, None, None, False)


def test_the_replan_and_the_dispatch_pass_mean_one_thing_by_a_retry(tenants: Tenants) -> None:
    charts = {
        (state, attempt): ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state, attempt=attempt)
        for state, attempt in [
            (ChartState.QUEUED, 0),
            (ChartState.QUEUED, 1),
            (ChartState.RETRY_WAIT, 2),
            (ChartState.RUNNING, 1),
            (ChartState.RUNNING, 2),
        ]
    }
    scenario = load_snapshot().scenario
    queued_retry = dict(zip(scenario.queued.id, scenario.queued.retry, strict=True))
    running_retry = {run.id: run.retry for run in scenario.running}
    in_flight = sorted(run.retry for run in load_dispatch_view().in_flight)
    for (state, attempt), chart in charts.items():
        planned = running_retry if state == ChartState.RUNNING else queued_retry
        assert planned[chart_key(chart.pk)] is is_retry(state=state, attempt=attempt), (state, attempt)
    assert in_flight == [False, True]


def test_chart_ids_read_back_every_chart_key() -> None:
    ids = [0, 1, 998, 999, 1000, 2**63 - 1]
    assert chart_ids([chart_key(chart_id) for chart_id in ids]).tolist() == ids
    assert chart_ids(["12", "7"]).tolist() == [12, 7]  # keys of another width: one at a time
    assert chart_ids([]).tolist() == []


def test_pairs_are_numbered_alike_whether_or_not_their_ids_fit_one_integer() -> None:
    from scheduling.snapshot import _pair_codes

    orgs, workflows = [3, 1, 3, 2**62, 1], [7, 7, 7, 5, 8]
    pair_of, pairs = _pair_codes(orgs, workflows)  # too large for one integer: one pair at a time
    assert [pairs[code] for code in pair_of] == list(zip(orgs, workflows, strict=True))
    small_of, small = _pair_codes(orgs[:3] + orgs[4:], workflows[:3] + workflows[4:])
    assert [small[code] for code in small_of] == [(3, 7), (1, 7), (3, 7), (1, 8)]
    assert _pair_codes([], [])[1] == []


def test_epoch_is_the_core_s_seconds_of_the_stored_time_to_the_bit(tenants: Tenants) -> None:
    now = timezone.now()
    moments = [now.replace(microsecond=micros) for micros in (0, 1, 123_457, 500_000, 999_999)]
    for moment in moments:
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, created_at=moment)
    read = Chart.objects.annotate(seconds=Epoch("created_at")).values_list("created_at", "seconds")
    assert sorted(read) == sorted((moment, to_seconds(moment)) for moment in moments)
    assert all(type(seconds) is float for _, seconds in read)
