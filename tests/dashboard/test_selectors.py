"""The dashboard's reads: what they return, and a query count that does not grow with the data."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartState, DurationStat
from knobs.models import ConfigChange, SchedulerConfig
from orgs.models import OrgChange, ProviderPause, WorkflowCost
from scheduling import selectors
from scheduling.models import QueueSample
from scheduling.snapshot import load_snapshot
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.factories import ChartFactory, OrgFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(tenants: Tenants) -> dict[str, Any]:
    """Many rows of every kind, so that a query per row would show in the counts."""
    now = timezone.now()
    SchedulerConfig.load()
    orgs = [tenants.org_a, tenants.org_b, *(OrgFactory(weight=1) for _ in range(8))]
    heavy = WorkflowFactory(name="train", default_cost=3)
    plan_queue(orgs, tenants.workflow, 200)
    for i, org in enumerate(orgs):
        WorkflowCost.objects.create(org=org, workflow=heavy, cost=2 + i)
        ChartFactory(org=org, workflow=heavy, state=ChartState.PAUSED)
        for j in range(3):
            ChartFactory(
                org=org,
                workflow=heavy,
                state=ChartState.RUNNING,
                cost=2 + i,
                started_at=now - timedelta(seconds=30 * (j + 1)),
                eta=now + timedelta(seconds=30),
            )
        DurationStat.objects.create(org=org, workflow=heavy, count=2, total_seconds=240.0)
        OrgChange.objects.create(org=org, actor="user:x", field="weight", old_value="1", new_value="2")
    held = OrgFactory(weight=0, slug="held")
    ChartFactory(org=held, workflow=tenants.workflow)
    ChartEvent.objects.bulk_create(
        ChartEvent(chart=chart, to_state="queued", actor="user:x") for chart in Chart.objects.all()[:60]
    )
    ConfigChange.objects.create(actor="user:x", field="budget", old_value="10", new_value="20")
    provider = ProviderFactory(slug="openai")
    ProviderPause.objects.create(provider=provider, until=now + timedelta(hours=1), created_by="user:x")
    ProviderPause.objects.create(provider=provider, org=held, until=now + timedelta(hours=2), created_by="user:x")
    for minute in range(30):
        QueueSample.objects.create(
            at=now - timedelta(minutes=minute), queued=200 - minute, running=30, budget=40, cost_in_use=35
        )
    return {"orgs": orgs, "held": held, "heavy": heavy, "now": now}


@pytest.mark.parametrize(
    ("name", "call", "queries"),
    [
        ("summary", lambda: selectors.summary(), 3),
        ("queue", lambda: selectors.queue_page(start=50, limit=100), 2),
        ("outside", lambda: selectors.outside_plan(), 3),
        ("inflight", lambda: selectors.in_flight(), 4),  # with the workflows' initial durations
        ("orgs", lambda: selectors.org_rows(), 3),
        ("meta", lambda: selectors.workflows_and_providers(), 3),
        ("events", lambda: selectors.recent_events(limit=50), 3),
        ("samples", lambda: selectors.queue_samples(), 1),
    ],
)
def test_every_read_runs_a_fixed_number_of_queries(
    busy: dict[str, Any], django_assert_max_num_queries: Any, name: str, call: Any, queries: int
) -> None:
    with django_assert_max_num_queries(queries):
        result = call()
    assert result


def test_summary_and_org_rows_share_one_aggregate(busy: dict[str, Any], django_assert_max_num_queries: Any) -> None:
    with django_assert_max_num_queries(5):
        load = selectors.active_load()
        summary = selectors.summary(load=load)
        rows = selectors.org_rows(load=load)
    assert summary["queued"] == sum(row["queued"] for row in rows)
    assert summary["cost_in_use"] == sum(row["cost_in_use"] for row in rows)


def test_queue_page_by_org_runs_two_queries(busy: dict[str, Any], django_assert_max_num_queries: Any) -> None:
    with django_assert_max_num_queries(2):
        page = selectors.queue_page(org=busy["orgs"][3], offset=5, limit=10)
    assert [row["position"] for row in page["rows"]] == [53 + 10 * k for k in range(10)]


def test_summary_counts_and_budget_use(busy: dict[str, Any]) -> None:
    summary = selectors.summary()
    assert (summary["queued"], summary["paused"], summary["running"]) == (201, 10, 30)
    assert summary["cost_in_use"] == sum(3 * (2 + i) for i in range(10))
    assert summary["planned_at"] is not None


def test_in_flight_elapsed_and_expected(busy: dict[str, Any]) -> None:
    rows = selectors.in_flight()["rows"]
    # Elapsed is read at the selector's clock, which runs on while the fixture writes its rows.
    since_setup = (timezone.now() - busy["now"]).total_seconds()
    assert len(rows) == 30
    first = rows[0]
    assert 90 - 1 <= first["elapsed"] <= 90 + since_setup + 1
    assert first["expected"] == pytest.approx(120, abs=2)  # started 90 s ago, plan finishes in 30 s


def test_in_flight_expects_the_mean_run(tenants: Tenants) -> None:
    ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=timezone.now(), cost=1
    )
    DurationStat.objects.create(org=tenants.org_a, workflow=tenants.workflow, count=4, total_seconds=100.0)
    (row,) = selectors.in_flight()["rows"]
    assert row["expected"] == pytest.approx(25.0)


@pytest.mark.parametrize(
    ("known", "expected"),
    [
        ("pair", 25.0),  # the chart's own (org, workflow)
        ("org", 40.0),  # only its org's runs of another workflow
        ("workflow", 90.0),  # only another org's runs of its workflow
        ("org and workflow", 90.0),  # both: another org's runs of its workflow come first
        ("nothing", None),  # FAIRSCHED_DEFAULT_DURATION
    ],
)
def test_in_flight_expects_what_the_planner_expects(
    tenants: Tenants, settings: Any, known: str, expected: float | None
) -> None:
    """The dashboard's expected duration and the plan's `avg` are one rule (`snapshot.Durations`),
    along the whole fallback chain."""
    settings.FAIRSCHED_DEFAULT_DURATION = 75.0
    SchedulerConfig.load()
    other = WorkflowFactory(name="other")
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=timezone.now(), cost=1
    )
    stats = {
        "pair": [(tenants.org_a, tenants.workflow, 4, 100.0)],
        "org": [(tenants.org_a, other, 2, 80.0)],
        "workflow": [(tenants.org_b, tenants.workflow, 1, 90.0)],
        "org and workflow": [(tenants.org_a, other, 2, 80.0), (tenants.org_b, tenants.workflow, 1, 90.0)],
        "nothing": [],
    }[known]
    for org, workflow, count, total in stats:
        DurationStat.objects.create(org=org, workflow=workflow, count=count, total_seconds=total)

    (row,) = selectors.in_flight()["rows"]
    (running,) = load_snapshot().scenario.running
    assert running.id == chart.pk
    assert row["expected"] == pytest.approx(running.avg)
    assert row["expected"] == pytest.approx(75.0 if expected is None else expected)


def test_org_rows(busy: dict[str, Any]) -> None:
    rows = {row["slug"]: row for row in selectors.org_rows()}
    acme = rows["acme"]
    assert (acme["queued"], acme["paused"], acme["running"], acme["cost_in_use"]) == (20, 1, 3, 6)
    assert acme["costs"] == {"train": 2}
    assert rows["held"]["held"] is True
    assert rows["held"]["queued"] == 1


def test_outside_plan_lists_paused_and_held(busy: dict[str, Any]) -> None:
    outside = selectors.outside_plan()
    assert outside["total"] == 11
    assert sum(row["held"] for row in outside["rows"]) == 1
    acme_paused = next(row for row in outside["rows"] if row["org"] == "acme")
    assert acme_paused["cost"] == 2  # the org's override of the workflow's default 3


def test_recent_events_merge_newest_first(busy: dict[str, Any]) -> None:
    events = selectors.recent_events(limit=100)
    assert {event["kind"] for event in events} == {"chart", "org", "config"}
    assert [event["at"] for event in events] == sorted((event["at"] for event in events), reverse=True)


def test_samples_oldest_first_within_the_window(busy: dict[str, Any]) -> None:
    samples = selectors.queue_samples(window=timedelta(minutes=10))
    assert len(samples) in (10, 11)
    assert samples[0]["at"] < samples[-1]["at"]


def test_providers_show_their_pauses(busy: dict[str, Any]) -> None:
    (provider,) = selectors.workflows_and_providers()["providers"]
    assert [pause["org"] for pause in provider["pauses"]] == [None, "held"]


def test_a_deep_queue_page_is_an_index_range_scan(tenants: Tenants) -> None:
    from django.db import connection

    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 20_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE charts_chart, charts_chartplan")
    planned = Chart.objects.filter(state__in=[ChartState.QUEUED, ChartState.RETRY_WAIT], position__isnull=False)
    plan = planned.filter(position__gte=15_000).order_by("position")[:100].explain()
    assert "Index" in plan
    assert "Seq Scan" not in plan
    assert "Sort" not in plan.split("->")[0]
    assert [row["position"] for row in selectors.queue_page(start=15_000, limit=3)["rows"]] == [15_000, 15_001, 15_002]
    assert selectors.queue_page(start=0, limit=1)["total"] == 20_000


def test_in_flight_expects_what_the_planner_expects_of_a_run_that_has_lasted(tenants: Tenants) -> None:
    """The planner counts a pair's runs in flight as runs longer than they have lasted (#25's
    survivorship rule): the dashboard's expected duration of a chart no plan has seen yet follows it."""
    chart = ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        state=ChartState.RUNNING,
        started_at=timezone.now() - timedelta(seconds=40),
        cost=1,
    )
    runs = [20.0, 22.0, 28.0, 30.0]
    DurationStat.objects.create(
        org=tenants.org_a,
        workflow=tenants.workflow,
        count=len(runs),
        total_seconds=sum(runs),
        sum_log=sum(math.log(run) for run in runs),
        sum_log_sq=sum(math.log(run) ** 2 for run in runs),
    )

    (row,) = selectors.in_flight()["rows"]
    (running,) = load_snapshot().scenario.running
    assert running.id == chart.pk
    assert running.avg > 25.0  # the run that has lasted 40 s moved the pair's mean
    assert row["expected"] == pytest.approx(running.avg, rel=1e-3)
