"""/metrics: tenant-aware figures from PostgreSQL and the passes' counters from Redis, never public."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import ChartState
from common.actors import Actor
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from scheduling import metrics
from scheduling.reconcile import reconcile_run
from tests.conftest import Tenants
from tests.factories import ChartFactory


@pytest.fixture(autouse=True)
def _fresh_counters() -> None:
    client = metrics._redis()
    for key in client.scan_iter(f"{metrics.PREFIX}*"):
        client.delete(key)


def test_staff_see_per_org_figures_and_pass_counters(tenants: Tenants, client: Client) -> None:
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.QUEUED, waiting_reason="turn")
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING, cost=3)
    metrics.observe_start(org="acme", waited=42.0, first=True, cost=3)
    metrics.observe_finish(org="acme", cost=3, retry=False)
    metrics.observe_failure(org="beta", kind="failed", cost=2)
    metrics.observe_dispatch(latency=0.02, started=1, skips={("acme", "org_cap"): 2, ("beta", "budget"): 1})
    metrics.observe_replan(0.3)

    client.force_login(tenants.staff)
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'fairsched_queued_charts{org="acme"} 1.0' in text
    assert 'fairsched_running_charts{org="acme"} 1.0' in text
    assert 'fairsched_cost_units_in_use{org="acme"} 3.0' in text
    assert 'fairsched_queued_charts{org="beta"} 0.0' in text
    assert 'fairsched_completed_cost_units_total{org="acme"} 3.0' in text
    assert 'fairsched_dispatch_skips_total{org="acme",reason="org_cap"} 2.0' in text
    assert 'fairsched_dispatch_skips_total{org="beta",reason="budget"} 1.0' in text
    assert 'fairsched_waiting_charts{org="acme",reason="turn"} 1.0' in text
    assert 'fairsched_started_cost_units_total{org="acme"} 3.0' in text
    assert 'fairsched_failed_cost_units_total{org="beta"} 2.0' in text
    assert 'fairsched_failed_runs_total{kind="failed",org="beta"} 1.0' in text
    assert 'fairsched_time_to_first_start_seconds_bucket{le="60",org="acme"} 1.0' in text
    assert 'fairsched_time_to_first_start_seconds_bucket{le="30",org="acme"} 0.0' in text
    assert "fairsched_replan_duration_seconds_count 1.0" in text
    assert "fairsched_budget_used 3.0" in text


def test_metrics_are_not_public(tenants: Tenants, client: Client, settings: object) -> None:
    assert client.get("/metrics").status_code == 403
    client.force_login(tenants.member_a)
    assert client.get("/metrics").status_code == 403


def test_a_scraper_presents_the_metrics_token(tenants: Tenants, client: Client, settings: object) -> None:
    settings.METRICS_TOKEN = "s3cret-scrape"  # type: ignore[attr-defined]
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape").status_code == 200


def test_throttles_are_counted_apart_from_failures(tenants: Tenants, client: Client) -> None:
    metrics.observe_throttle(org="acme", provider="gpu-east")
    metrics.observe_throttle(org="acme", provider="gpu-east")
    metrics.observe_throttle(org="beta", provider="")
    metrics.observe_failure(org="acme", kind="timed_out", cost=1)
    metrics.observe_failure(org="beta", kind="terminated", cost=1)

    client.force_login(tenants.staff)
    text = client.get("/metrics").content.decode()
    assert 'fairsched_throttled_runs_total{org="acme",provider="gpu-east"} 2.0' in text
    assert 'fairsched_throttled_runs_total{org="beta",provider=""} 1.0' in text
    assert 'fairsched_failed_runs_total{kind="timed_out",org="acme"} 1.0' in text
    assert 'fairsched_failed_runs_total{kind="terminated",org="beta"} 1.0' in text
    assert 'fairsched_failed_runs_total{kind="failed"' not in text


def test_reconcile_passes_and_the_pass_intervals_are_exported(tenants: Tenants, client: Client) -> None:
    """A reconcile pass that reaches its end is counted (here one with nothing in flight: Temporal is
    not asked); the configured intervals are there for the alerts to compare the passes with."""
    scheduler_config_set(actor=Actor("user:stella", staff=True), replan_interval=7.0, reconcile_interval=3.0)
    reconcile_run()
    reconcile_run()

    client.force_login(tenants.staff)
    text = client.get("/metrics").content.decode()
    assert "fairsched_reconcile_duration_seconds_count 2.0" in text
    assert "fairsched_replan_interval_seconds 7.0" in text
    assert "fairsched_reconcile_interval_seconds 3.0" in text


def test_webhook_attempts_are_counted_by_org_and_outcome(tenants: Tenants, client: Client) -> None:
    metrics.observe_webhook_attempt(org="acme", ok=True)
    metrics.observe_webhook_attempt(org="acme", ok=False)
    metrics.observe_webhook_attempt(org="acme", ok=False, disabled=True)
    metrics.observe_webhook_attempt(org="", ok=True)

    client.force_login(tenants.staff)
    text = client.get("/metrics").content.decode()
    assert 'fairsched_webhook_attempts_total{org="acme",outcome="ok"} 1.0' in text
    assert 'fairsched_webhook_attempts_total{org="acme",outcome="failed"} 2.0' in text
    assert 'fairsched_webhook_attempts_total{org="",outcome="ok"} 1.0' in text
    assert 'fairsched_webhook_endpoints_disabled_total{org="acme"} 1.0' in text


def test_the_promise_figures_on_known_rows(tenants: Tenants, client: Client) -> None:
    """acme: two charts at risk (one waiting, one running), one late and one on track; of its charts
    that succeeded with a due time, in the last hour one of two kept it, in the last day two of four
    (two finished earlier). beta: nothing at risk, no finished promise (no attainment sample); its
    target share is told, acme has none."""
    now = timezone.now()
    hour = timedelta(hours=1)
    tenants.org_b.turnaround_share = 0.95
    tenants.org_b.save()

    def chart(org: Any = tenants.org_a, **fields: Any) -> None:
        ChartFactory(org=org, workflow=tenants.workflow, **fields)

    chart(due_at=now + hour, late_chance=0.6, position=0)
    chart(state=ChartState.RUNNING, due_at=now + hour, late_chance=0.99, position=1)
    chart(due_at=now - hour, late_chance=0.99, position=2)  # late, not at risk
    chart(due_at=now + hour, late_chance=0.2, position=3)
    chart(org=tenants.org_b, due_at=now + hour, late_chance=0.4, position=4)
    for finished, due in (
        (now - hour / 2, now),  # kept, in the hour
        (now - hour / 4, now - hour / 2),  # missed, in the hour
        (now - 3 * hour, now - 2 * hour),  # kept, in the day
        (now - 5 * hour, now - 6 * hour),  # missed, in the day
        (now - 30 * hour, now),  # before the day
    ):
        chart(state=ChartState.SUCCEEDED, finished_at=finished, due_at=due)
    chart(state=ChartState.SUCCEEDED, finished_at=now - hour / 3)  # no promise: not counted
    metrics.observe_finish(org="acme", cost=1, retry=False, turnaround=1000.0)
    metrics.observe_finish(org="acme", cost=1, retry=False, turnaround=50000.0)

    client.force_login(tenants.staff)
    text = client.get("/metrics").content.decode()
    assert 'fairsched_charts_at_risk{org="acme"} 2.0' in text
    assert 'fairsched_charts_at_risk{org="beta"} 0.0' in text
    assert 'fairsched_turnaround_attainment{org="acme",window="1h"} 0.5' in text
    assert 'fairsched_turnaround_attainment{org="acme",window="1d"} 0.5' in text
    assert 'fairsched_turnaround_attainment{org="beta"' not in text
    assert 'fairsched_turnaround_target_share{org="beta"} 0.95' in text
    assert 'fairsched_turnaround_target_share{org="acme"}' not in text
    assert 'fairsched_turnaround_seconds_bucket{le="900",org="acme"} 0.0' in text
    assert 'fairsched_turnaround_seconds_bucket{le="1800",org="acme"} 1.0' in text
    assert 'fairsched_turnaround_seconds_bucket{le="86400",org="acme"} 2.0' in text
    assert 'fairsched_turnaround_seconds_count{org="acme"} 2.0' in text
    assert 'fairsched_turnaround_seconds_sum{org="acme"} 51000.0' in text


def test_the_threshold_moves_what_is_at_risk(tenants: Tenants, client: Client) -> None:
    ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, due_at=timezone.now() + timedelta(hours=1), late_chance=0.4
    )
    client.force_login(tenants.staff)
    assert 'fairsched_charts_at_risk{org="acme"} 0.0' in client.get("/metrics").content.decode()
    SchedulerConfig.objects.update_or_create(pk=1, defaults={"at_risk_threshold": 0.3})
    assert 'fairsched_charts_at_risk{org="acme"} 1.0' in client.get("/metrics").content.decode()


def test_attainment_counts_a_failed_chart_as_a_miss_and_leaves_a_cancelled_one_out(
    tenants: Tenants, client: Client
) -> None:
    """A promise is kept by a chart that succeeded by its due time. A chart that failed ended by the
    system's doing without the result promised: a miss, however early it failed. A chart cancelled
    was withdrawn by its customer: no promise is left to keep, it is not counted. acme, in the last
    hour: one kept, one failed before its due time, one failed after it, one cancelled: 1 of 3."""
    now = timezone.now()
    hour = timedelta(hours=1)
    for state, finished in (
        (ChartState.SUCCEEDED, now - hour / 2),
        (ChartState.FAILED, now - hour / 2),
        (ChartState.FAILED, now - hour / 8),
        (ChartState.CANCELLED, now - hour / 2),
    ):
        ChartFactory(
            org=tenants.org_a, workflow=tenants.workflow, state=state, finished_at=finished, due_at=now - hour / 4
        )
    ChartFactory(
        org=tenants.org_b, workflow=tenants.workflow, state=ChartState.CANCELLED, finished_at=now, due_at=now + hour
    )

    client.force_login(tenants.staff)
    text = client.get("/metrics").content.decode()
    assert 'fairsched_turnaround_attainment{org="acme",window="1h"} 0.3333333333333333' in text
    assert 'fairsched_turnaround_attainment{org="acme",window="1d"} 0.3333333333333333' in text
    assert 'fairsched_turnaround_attainment{org="beta"' not in text  # only a cancelled chart: no sample
