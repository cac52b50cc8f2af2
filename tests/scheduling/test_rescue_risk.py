"""The rescue counts a plan's charts at risk and late by the promise rule of `charts.promise`: on the
same charts, its verdicts are those the API, the portal and the dashboard read from the stored plan."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.utils import timezone

from charts.models import ACTIVE_STATES, Chart, ChartState
from charts.promise import AT_RISK, LATE, ON_TRACK, chart_promise
from charts.selectors import charts_visible
from knobs.models import SchedulerConfig
from scheduling.reconcile import duration_record
from scheduling.replan import plan_refresh
from scheduling.rescue import _dues, plan_risk
from scheduling.snapshot import org_key
from scheduling.what_if import what_if_base
from tests.conftest import Tenants
from tests.factories import ChartFactory


def test_the_rescues_risk_is_the_promise_rule_on_the_same_charts(tenants: Tenants) -> None:
    """Two orgs, one unit at a time, learned runs of 40-90 s (so the chances spread between 0 and 1):
    waiting and running charts due from past to far ahead, some with no due time. The replan stores
    its plan; the rescue's `plan_risk` of the plan of that instant names exactly the charts that
    `chart_promise` calls at risk, per org, and counts the same late ones."""
    SchedulerConfig.objects.update_or_create(id=1, defaults={"budget": 1, "arrival_window": 0})
    for seconds in (40, 60, 90, 50, 70):
        duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=seconds)
    now = timezone.now()
    created = now - timedelta(minutes=10)
    dues = [-120, None, 30, 90, 150, 240, 330, 420, 600, 900, None, 1800]
    for index, due in enumerate(dues):
        org = tenants.org_a if index % 3 else tenants.org_b
        chart = ChartFactory(org=org, workflow=tenants.workflow, state=ChartState.QUEUED)
        Chart.objects.filter(pk=chart.pk).update(
            created_at=created + timedelta(seconds=index),
            due_at=None if due is None else now + timedelta(seconds=due),
        )
    for due in (-30, 20):  # running: one past due, one due before it likely ends
        ChartFactory(
            org=tenants.org_b,
            workflow=tenants.workflow,
            state=ChartState.RUNNING,
            started_at=now - timedelta(seconds=30),
            due_at=now + timedelta(seconds=due),
        )
    plan_refresh(now=now)

    charts = [chart for chart in charts_visible(org_ids=None) if chart.state in ACTIVE_STATES]
    by_rule = {chart.pk: chart_promise(chart, now=now) for chart in charts}
    assert {AT_RISK, LATE, ON_TRACK, None} <= set(by_rule.values())  # every verdict is exercised
    org_of = {chart.pk: org_key(chart.org_id) for chart in charts}

    base = what_if_base(now=now)
    risk = plan_risk(base.before, _dues(base.snapshot), float(SchedulerConfig.load().at_risk_threshold))

    assert {key: set(ids) for key, ids in risk.at_risk_charts.items()} == {
        key: {pk for pk, promise in by_rule.items() if promise == AT_RISK and org_of[pk] == key}
        for key in {org_of[pk] for pk, promise in by_rule.items() if promise == AT_RISK}
    }
    assert dict(risk.at_risk) == dict(Counter(org_of[pk] for pk, promise in by_rule.items() if promise == AT_RISK))
    assert dict(risk.late) == dict(Counter(org_of[pk] for pk, promise in by_rule.items() if promise == LATE))
