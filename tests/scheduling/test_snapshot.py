"""The snapshot: the replan's scenario read whole columns at a time, as a row-by-row reading gives it;
its dispatch view (what the dispatch pass reads besides the order); and the one meaning of a retry,
shared by the replan's scenario and the dispatch pass."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from itertools import compress
from typing import Any

import numpy as np
import pytest
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone
from hypothesis import example, given
from hypothesis import strategies as st

from charts.models import ACTIVE_STATES, IN_FLIGHT_STATES, WAITING_STATES, Chart, ChartState, is_retry
from orgs.models import ProviderPause, WorkflowCost
from scheduling import core, packed_rows, snapshot
from scheduling.reconcile import duration_record
from scheduling.snapshot import (
    Durations,
    Epoch,
    InFlightRun,
    backlogged_and_ready,
    load_costs,
    load_dispatch_view,
    load_snapshot,
    org_key,
    run_cost_expression,
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


def test_the_cost_rule_reads_the_same_in_python_and_in_sql(tenants: Tenants) -> None:
    """`Costs.of` and `run_cost_expression` are one rule: for charts with and without an override,
    waiting and in flight, with and without a recorded cost, both give each chart the same cost."""
    heavy = WorkflowFactory(name="heavy", default_cost=4)
    WorkflowCost.objects.create(org=tenants.org_b, workflow=heavy, cost=7)
    cases = [
        (tenants.org_a, heavy, ChartState.QUEUED, None, 4),  # the default
        (tenants.org_b, heavy, ChartState.QUEUED, None, 7),  # the org's override
        (tenants.org_b, heavy, ChartState.RUNNING, 2, 2),  # what its claim recorded
        (tenants.org_b, heavy, ChartState.DISPATCHING, None, 7),  # none recorded: the override
    ]
    charts = [
        (ChartFactory(org=org, workflow=workflow, state=state, cost=cost), expected)
        for org, workflow, state, cost, expected in cases
    ]
    costs = load_costs(timezone.now())
    sql = dict(Chart.objects.annotate(run=run_cost_expression(recorded=True)).values_list("id", "run"))
    sql_unrecorded = dict(Chart.objects.annotate(run=run_cost_expression()).values_list("id", "run"))
    for chart, expected in charts:
        python = costs.of(chart.org_id, chart.workflow_id, recorded=chart.cost)
        assert (python, sql[chart.pk]) == (expected, expected)
        assert sql_unrecorded[chart.pk] == costs.of(chart.org_id, chart.workflow_id)
    assert costs.of(None, heavy.pk) == 4  # no org: the workflow's default


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
    paused_chart = Chart(
        org_id=tenants.org_a.pk,
        workflow_id=tenants.workflow.pk,
        available_at=backoff,
        state=ChartState.RETRY_WAIT,
        attempt=1,
    )
    backing_off = Chart(
        org_id=tenants.org_a.pk,
        workflow_id=tenants.workflow.pk,
        available_at=until + timedelta(minutes=1),
        state=ChartState.RETRY_WAIT,
        attempt=1,
    )
    other_chart = Chart(
        org_id=tenants.org_b.pk, workflow_id=tenants.workflow.pk, available_at=None, state=ChartState.QUEUED, attempt=0
    )
    paused, own, other = view.candidates([paused_chart, backing_off, other_chart])
    assert (paused.cost, paused.retry, paused.provider_paused) == (1, True, True)
    assert paused.available_at == pytest.approx(to_seconds(until))  # the provider's pause lasts longer
    assert (own.available_at, own.provider_paused) == (pytest.approx(to_seconds(until) + 60), False)
    assert (other.cost, other.available_at, other.provider_paused, other.retry) == (1, None, False, False)


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
        assert planned[chart.pk] is is_retry(state=state, attempt=attempt), (state, attempt)
    assert in_flight == [False, True]


def test_the_core_keys_each_chart_by_its_primary_key(tenants: Tenants) -> None:
    """The chart ids cross into the core as the integers they are: the queue's id column is the
    waiting rows' own array, the running charts' ids their primary keys."""
    for state in (ChartState.QUEUED, ChartState.QUEUED, ChartState.RETRY_WAIT, ChartState.RUNNING):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state, attempt=int(state != "queued"))
    snapshot = load_snapshot()
    ids = core.QueueColumns.of(snapshot.scenario.queued).given("id")
    assert ids is snapshot.waiting.id
    assert set(ids.tolist()) == set(Chart.objects.filter(state__in=WAITING_STATES).values_list("pk", flat=True))
    assert [chart.id for chart in snapshot.scenario.running] == snapshot.in_flight.id.tolist()
    assert all(type(chart.id) is int for chart in snapshot.scenario.running)


def test_pairs_are_numbered_alike_whether_or_not_their_ids_fit_one_integer() -> None:
    from scheduling.snapshot import _pair_codes

    orgs, workflows = [3, 1, 3, 2**62, 1], [7, 7, 7, 5, 8]
    pair_of, pairs = _pair_codes(orgs, workflows)  # too large for one integer: one pair at a time
    assert [pairs[code] for code in pair_of] == list(zip(orgs, workflows, strict=True))
    small_of, small = _pair_codes(orgs[:3] + orgs[4:], workflows[:3] + workflows[4:])  # a table of codes
    assert [small[code] for code in small_of] == [(3, 7), (1, 7), (3, 7), (1, 8)]
    sparse_of, sparse = _pair_codes([3_000, 1, 3_000, 1], [7, 7, 7, 8])  # codes too sparse for a table: sorted
    assert [sparse[code] for code in sparse_of] == [(3_000, 7), (1, 7), (3_000, 7), (1, 8)]
    assert small_of.tolist() == sparse_of.tolist() == [2, 0, 2, 1]  # numbered in the pairs' order either way
    assert _pair_codes([], [])[1] == []


@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.booleans(), st.booleans(), st.none() | st.sampled_from([-1.5, 0.0, 2.0])),
        max_size=30,
    ),
    st.sampled_from([-2.0, 0.0, 1.0, 3.0]),
    st.lists(st.integers(0, 4), max_size=6),
)
@example([(0, False, False, 0.0), (1, False, False, 2.0), (2, True, False, None), (3, False, True, None)], 0.0, [4])
def test_backlogged_and_ready_are_the_orgs_a_chart_by_chart_reading_finds(
    charts: list[tuple[int, bool, bool, float | None]], instant: float, running_orgs: list[int]
) -> None:
    """`backlogged_and_ready` tests the charts on the queue's arrays: the orgs it finds are those a
    chart-by-chart reading of the rule finds, for a queue given as lists (the preview's) and as
    arrays (the snapshot's)."""
    orgs = [org_key(number) for number in range(5)]
    rows = {
        key: snapshot.OrgRow(key, weight=number % 3, max_concurrency=[None, 1, 2][number % 3], served=0.0,
                             weight_before_hold=None)
        for number, key in enumerate(orgs)
    }  # fmt: skip
    running = [core.RunningChart(f"r{index}", orgs[org], 0.0, 60.0, 1) for index, org in enumerate(running_orgs)]
    queued = [
        core.QueuedChart(index, orgs[org], 0.0, 60.0, 1, high, paused, 0, available_at, False)
        for index, (org, paused, high, available_at) in enumerate(charts)
    ]
    in_flight = [chart.org for chart in running]
    backlogged = {c.org for c in queued if not c.paused and not c.high_priority and rows[c.org].weight > 0}
    ready = {
        c.org
        for c in queued
        if c.org in backlogged
        and not c.paused
        and not c.high_priority
        and (c.available_at is None or c.available_at <= instant)
        and (rows[c.org].max_concurrency is None or in_flight.count(c.org) < rows[c.org].max_concurrency)
    }
    as_lists = core.QueueColumns.of(queued)
    as_arrays = core.QueueColumns(
        id=as_lists.id, org=as_lists.org, **{
            name: getattr(as_lists.arrays, name)
            for name in ("created", "avg", "cost", "high_priority", "paused", "priority", "available_at", "retry")
        },
    )  # fmt: skip
    assert backlogged_and_ready(as_lists, running, rows, instant) == (backlogged, ready)
    assert backlogged_and_ready(as_arrays, running, rows, instant) == (backlogged, ready)


def _read_row_by_row(
    now: datetime,
) -> tuple[dict[str, object], dict[str, core.RunningChart], dict[str, float], set[str]]:
    """The reference for `load_snapshot`: each active chart read as a model instance and mapped by the
    snapshot's own rules (`Costs`, `Durations`, `is_retry`): the waiting charts (with their workflow),
    the running ones, every spread that is known, and the charts a provider pause holds; each pair's
    runs in flight (from their start, else their claim) count in its durations."""
    lasted: dict[tuple[int, int], list[float]] = {}
    for chart in Chart.objects.filter(state__in=IN_FLIGHT_STATES):
        started = chart.started_at or chart.claimed_at
        if started is not None:
            lasted.setdefault((chart.org_id, chart.workflow_id), []).append(to_seconds(now) - to_seconds(started))
    costs, durations = load_costs(now), Durations.load(lasted=lasted)
    queued: dict[str, object] = {}
    running: dict[str, core.RunningChart] = {}
    spread: dict[str, float] = {}
    held: set[str] = set()
    for chart in Chart.objects.filter(state__in=ACTIVE_STATES):
        key, org = chart.pk, org_key(chart.org_id)
        mean, sigma = durations.of(chart.org_id, chart.workflow_id)
        if sigma:
            spread[key] = sigma
        retry = is_retry(state=chart.state, attempt=chart.attempt)
        if chart.state in WAITING_STATES:
            own = to_seconds(chart.available_at) if chart.available_at else None
            pause = costs.pause_until(chart.org_id, chart.workflow_id)
            ready = own if pause is None else max(own or 0.0, pause)
            if ready != own:
                held.add(key)
            queued[key] = (
                core.QueuedChart(
                    key, org, to_seconds(chart.created_at), mean, costs.of(chart.org_id, chart.workflow_id),
                    chart.high_priority, chart.state == ChartState.PAUSED, chart.priority, ready, retry,
                ),
                chart.workflow_id,
            )  # fmt: skip
        else:
            started = chart.started_at or chart.claimed_at
            cost = chart.cost or costs.of(chart.org_id, chart.workflow_id)
            running[key] = core.RunningChart(key, org, to_seconds(started or now), mean, cost, retry)
    return queued, running, spread, held


def _reading(path: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the snapshot read its charts in one statement, or in halves from two backends (whatever
    the table's size); the readers it calls are listed in the list returned."""
    called: list[str] = []
    for name in ("read", "read_in_halves"):
        reader = getattr(packed_rows, name)

        def spied(*args: Any, reader: Any = reader, name: str = name) -> Any:
            called.append(name)
            return reader(*args)

        monkeypatch.setattr(packed_rows, name, spied)
    if path == "in halves":
        monkeypatch.setattr(snapshot, "SPLIT_FROM_ROWS", -math.inf)
    return called


# Each test of the snapshot's reading, in one statement (inside the test's transaction) and in halves
# from two backends (outside one: the second backend sees committed rows only).
READ_PATHS = ["one statement", pytest.param("in halves", marks=pytest.mark.django_db(transaction=True))]
READERS = {"one statement": ["read"], "in halves": ["read_in_halves"]}


@pytest.mark.parametrize("path", READ_PATHS)
def test_the_snapshot_is_what_a_row_by_row_reading_gives_on_a_busy_queue(
    tenants: Tenants, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    called = _reading(path, monkeypatch)
    now = timezone.now()
    llm, gpu = ProviderFactory(slug="llm"), ProviderFactory(slug="gpu")
    chat = WorkflowFactory(name="chat", default_cost=2, provider=llm)
    train = WorkflowFactory(name="train", default_cost=4, provider=gpu)
    plain = tenants.workflow
    WorkflowCost.objects.create(org=tenants.org_b, workflow=chat, cost=3)
    for seconds in (40, 60, 90):  # a spread for (org_a, chat) alone; (org_b, train) a single run: none
        duration_record(org_id=tenants.org_a.pk, workflow_id=chat.pk, seconds=seconds)
    duration_record(org_id=tenants.org_b.pk, workflow_id=train.pk, seconds=30)
    ProviderPause.objects.create(provider=llm, org=tenants.org_a, until=now + timedelta(minutes=5))
    ProviderPause.objects.create(provider=gpu, org=None, until=now + timedelta(minutes=2))
    ProviderPause.objects.create(provider=gpu, org=None, until=now - timedelta(minutes=2))  # over
    held = OrgFactory(slug="held", weight=0)
    states = [ChartState.QUEUED, ChartState.PAUSED, ChartState.RETRY_WAIT, ChartState.DISPATCHING, ChartState.RUNNING]
    for index in range(40):
        state = states[index % len(states)]
        in_flight = state in (ChartState.DISPATCHING, ChartState.RUNNING)
        ChartFactory(
            org=[tenants.org_a, tenants.org_b, held][index % 3],
            workflow=[plain, chat, train, chat][index % 4],
            state=state,
            attempt=index % 3,
            high_priority=index % 7 == 0,
            priority=(index % 5) - 2,
            created_at=now - timedelta(seconds=index * 37.5, microseconds=index),
            available_at=now + timedelta(seconds=index * 11 - 200) if index % 4 == 2 else None,
            cost=(index % 3 or None) if in_flight else None,  # a claim records its cost (not always, before)
            claimed_at=now - timedelta(seconds=index) if in_flight else None,
            started_at=now - timedelta(seconds=index / 2) if state == ChartState.RUNNING and index % 2 else None,
        )
    for state in (ChartState.SUCCEEDED, ChartState.FAILED, ChartState.CANCELLED):  # not active: not read
        ChartFactory(org=tenants.org_a, workflow=plain, state=state)

    snapshot = load_snapshot(now=now)

    scenario = snapshot.scenario
    queued, running, spread, provider_paused = _read_row_by_row(now)
    running = dict(sorted(running.items()))
    read = {
        chart.id: (chart, workflow) for chart, workflow in zip(scenario.queued, snapshot.queued_workflow, strict=True)
    }
    assert repr(sorted(read.items())) == repr(sorted(queued.items()))  # every value of its type, too
    assert repr(sorted(scenario.running, key=lambda chart: chart.id)) == repr(list(running.values()))
    assert {
        **{key: sigma for key, sigma in zip(scenario.queued.id, scenario.spread, strict=True) if sigma},
        **{chart.id: sigma for chart, sigma in zip(scenario.running, scenario.running_spread, strict=True) if sigma},
    } == spread
    assert len(scenario.spread) == len(scenario.queued)
    assert len(scenario.running_spread) == len(scenario.running)
    assert set(compress(scenario.queued.id, snapshot.provider_paused.tolist())) == provider_paused
    assert len(snapshot.provider_paused) == len(scenario.queued)
    assert len(queued) == 24
    assert len(running) == 16
    assert spread
    assert provider_paused
    assert called == READERS[path]


def _active_charts_by_the_orm() -> list[tuple[object, ...]]:
    """The reference for `ActiveCharts.load`: each active chart's fields by the ORM, times as `Epoch`
    (date_part, to the bit: hex), NaN for none; by id."""
    never = float("nan")
    rows = Chart.objects.filter(state__in=ACTIVE_STATES).order_by("id").values_list(
        "id", "org_id", "workflow_id", Epoch("created_at"), Epoch("available_at"), "high_priority", "priority",
        "state", "attempt", "cost", Epoch(Coalesce("started_at", "claimed_at")), Epoch("due_at"),
    )  # fmt: skip
    return [
        (chart_id, org_id, workflow_id, created.hex(), (never if available_at is None else available_at).hex(),
         high, priority, ACTIVE_STATES.index(state), attempt, cost or 0, (never if started is None else started).hex(),
         (never if due is None else due).hex())
        for chart_id, org_id, workflow_id, created, available_at, high, priority, state, attempt, cost, started, due
        in rows
    ]  # fmt: skip


@pytest.mark.parametrize("path", READ_PATHS)
@pytest.mark.parametrize("charts", [0, 1, 37])
def test_active_charts_are_the_orm_s_rows_to_the_bit(
    tenants: Tenants, path: str, charts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every state, NULL and recorded costs, claims with and without a start, backoffs and due times,
    times at the edges of what Python and PostgreSQL hold (year 1, year 9999, infinity); no chart,
    one, many."""
    called = _reading(path, monkeypatch)
    now = timezone.now()
    edges = [datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)]
    for index in range(charts):
        state = ACTIVE_STATES[index % len(ACTIVE_STATES)]
        in_flight = state in (ChartState.DISPATCHING, ChartState.RUNNING)
        ChartFactory(
            org=[tenants.org_a, tenants.org_b][index % 2],
            workflow=tenants.workflow,
            state=state,
            attempt=[0, 1, 2, 2**31 - 1][index % 4],
            high_priority=index % 3 == 0,
            priority=[0, -(2**31), 2**31 - 1, 5][index % 4],
            created_at=edges[0] if index == 1 else now - timedelta(seconds=index * 61.25, microseconds=index),
            available_at=[None, edges[1], now + timedelta(microseconds=index)][index % 3],
            cost=(index % 3 or None) if in_flight else None,
            claimed_at=now - timedelta(seconds=index, microseconds=1) if in_flight else None,
            started_at=now - timedelta(microseconds=index) if state == ChartState.RUNNING and index % 2 else None,
            due_at=[None, edges[1], now + timedelta(seconds=index, microseconds=7)][index % 3 if index % 5 else 0],
        )
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.SUCCEEDED)  # not active: not read
    if charts > 1:
        Chart.objects.filter(pk=Chart.objects.filter(state=ChartState.QUEUED).latest("pk").pk).update(
            available_at=RawSQL("'infinity'::timestamptz", ())
        )

    charts_read = snapshot.ActiveCharts.load()

    columns = [getattr(charts_read, name) for name in snapshot.ActiveCharts.__dataclass_fields__]
    assert [column.dtype for column in columns] == [
        np.int64, np.int64, np.int64, np.float64, np.float64, np.bool_, np.int32, np.int16, np.int32, np.int32,
        np.float64, np.float64,
    ]  # fmt: skip
    read = sorted(
        tuple(value.hex() if isinstance(value, float) else value for value in row)
        for row in zip(*(column.tolist() for column in columns), strict=True)
    )
    assert read == _active_charts_by_the_orm()
    assert len(read) == charts
    assert called == READERS[path]


def test_epoch_is_the_core_s_seconds_of_the_stored_time_to_the_bit(tenants: Tenants) -> None:
    now = timezone.now()
    moments = [now.replace(microsecond=micros) for micros in (0, 1, 123_457, 500_000, 999_999)]
    for moment in moments:
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, created_at=moment)
    read = Chart.objects.annotate(seconds=Epoch("created_at")).values_list("created_at", "seconds")
    assert sorted(read) == sorted((moment, to_seconds(moment)) for moment in moments)
    assert all(type(seconds) is float for _, seconds in read)


@pytest.mark.django_db(transaction=True)
def test_charts_read_in_halves_come_in_the_order_of_their_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The halves come end to end (even ids, then odd); the snapshot gives them back in the order of
    their ids, as a read in one piece of a table filled in id order gives them, the order the fair
    order's sort runs fastest on (the plan itself does not depend on it)."""
    called = _reading("in halves", monkeypatch)
    org, workflow = OrgFactory(slug="halves"), WorkflowFactory(name="halves")
    for _ in range(9):
        ChartFactory(org=org, workflow=workflow, state=ChartState.QUEUED)

    charts = snapshot.ActiveCharts.load()

    assert called == ["read_in_halves"]
    assert charts.id.tolist() == sorted(Chart.objects.values_list("id", flat=True))
    assert charts.created.tolist() == [
        to_seconds(created) for created in Chart.objects.order_by("id").values_list("created_at", flat=True)
    ]


def test_unknown_durations_take_the_spread_pooled_over_every_pair(tenants: Tenants, settings: Any) -> None:
    """A workflow never seen, and a pair of a single run, are as spread as every pair's runs pooled;
    with no pair of two runs, the configured FAIRSCHED_DEFAULT_DURATION_SPREAD."""
    settings.FAIRSCHED_DEFAULT_DURATION_SPREAD = 0.7
    once, never = WorkflowFactory(name="once"), WorkflowFactory(name="never")
    duration_record(org_id=tenants.org_a.pk, workflow_id=once.pk, seconds=10)
    assert Durations.load().of(tenants.org_a.pk, once.pk) == (10.0, 0.7)
    assert Durations.load().of(None, never.pk) == (settings.FAIRSCHED_DEFAULT_DURATION, 0.7)
    for seconds in (40, 60, 90):
        duration_record(org_id=tenants.org_b.pk, workflow_id=tenants.workflow.pk, seconds=seconds)
    logs = [math.log(seconds) for seconds in (10, 40, 60, 90)]
    centre = sum(logs) / len(logs)
    pooled = math.sqrt(sum((log - centre) ** 2 for log in logs) / len(logs))
    durations = Durations.load()
    assert durations.of(tenants.org_a.pk, once.pk) == pytest.approx((10.0, pooled))
    assert durations.of(None, never.pk) == pytest.approx((settings.FAIRSCHED_DEFAULT_DURATION, pooled))


def test_a_pair_never_run_asks_its_workflow_before_its_org(tenants: Tenants, settings: Any) -> None:
    """A pair never run takes its workflow's runs over every org (else its stated duration), before
    its org's runs of other workflows; the org's runs only where nothing is known of the workflow."""
    settings.FAIRSCHED_DEFAULT_DURATION_SPREAD = 0.7
    long, stated, unknown = (
        WorkflowFactory(name="long"),
        WorkflowFactory(name="stated", initial_duration=90),
        WorkflowFactory(name="unknown"),
    )
    duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=20)
    for seconds in (100, 110):
        duration_record(org_id=tenants.org_b.pk, workflow_id=long.pk, seconds=seconds)
    for durations in (
        Durations.load(),
        Durations.load(org_id=tenants.org_a.pk, workflow_ids=[long.pk, stated.pk, unknown.pk]),
    ):
        assert durations.of(tenants.org_a.pk, long.pk)[0] == pytest.approx(105.0)
        assert durations.of(tenants.org_a.pk, stated.pk)[0] == 90.0
        assert durations.of(tenants.org_a.pk, unknown.pk)[0] == 20.0


def test_a_workflow_never_run_is_expected_to_take_its_stated_duration(tenants: Tenants, settings: Any) -> None:
    """A workflow's `initial_duration` stands for its runs until one has been seen (with the unknown
    spread); learned runs replace it; a workflow without one keeps the configured default."""
    settings.FAIRSCHED_DEFAULT_DURATION_SPREAD = 0.7
    stated, unstated = WorkflowFactory(name="stated", initial_duration=20), WorkflowFactory(name="unstated")
    durations = Durations.load()
    assert durations.of(tenants.org_a.pk, stated.pk) == (20.0, 0.7)
    assert durations.of(None, stated.pk) == (20.0, 0.7)
    assert durations.of(None, unstated.pk) == (settings.FAIRSCHED_DEFAULT_DURATION, 0.7)
    assert Durations.load(org_id=tenants.org_a.pk, workflow_ids=[stated.pk]).of(tenants.org_a.pk, stated.pk) == (
        20.0,
        0.7,
    )
    for seconds in (8, 8):
        duration_record(org_id=tenants.org_b.pk, workflow_id=stated.pk, seconds=seconds)
    assert Durations.load().of(tenants.org_a.pk, stated.pk)[0] == pytest.approx(8.0)


def test_a_pair_s_runs_in_flight_count_as_runs_longer_than_they_have_lasted(tenants: Tenants) -> None:
    """The snapshot's durations count each pair's runs in flight as runs known to last longer than
    they have so far (`core.durations.duration_censored`): a pair whose three finished runs took 10 s
    and whose fourth has run 20 s is expected to take longer than 10 s, for its queued charts and
    its running one alike; a pair with nothing in flight keeps its finished runs' mean."""
    workflow = tenants.workflow
    for seconds in (9, 10, 11):
        duration_record(org_id=tenants.org_a.pk, workflow_id=workflow.pk, seconds=seconds)
        duration_record(org_id=tenants.org_b.pk, workflow_id=workflow.pk, seconds=seconds)
    now = timezone.now()
    ChartFactory(org=tenants.org_a, workflow=workflow, state=ChartState.RUNNING, started_at=now - timedelta(seconds=20))
    ChartFactory(org=tenants.org_a, workflow=workflow, state=ChartState.QUEUED)
    ChartFactory(org=tenants.org_b, workflow=workflow, state=ChartState.QUEUED)

    scenario = load_snapshot(now=now).scenario

    queued = {org: avg for org, avg in zip(scenario.queued.org, list(scenario.queued.avg), strict=True)}
    assert queued[org_key(tenants.org_b.pk)] == pytest.approx(10.0, rel=0.01)
    assert queued[org_key(tenants.org_a.pk)] > 12.0
    assert scenario.running[0].avg == pytest.approx(queued[org_key(tenants.org_a.pk)])
