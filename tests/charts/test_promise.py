"""The promise rule (`charts.promise`): its words for a chart at hand, and its conditions on a
queryset held to them on every kind of chart."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from charts.models import Chart, ChartState
from charts.promise import AT_RISK, LATE, ON_TRACK, as_flag, at_risk_q, chart_promise, late_q, promise_of
from charts.selectors import charts_visible
from knobs.models import SchedulerConfig
from tests.conftest import Tenants
from tests.factories import ChartFactory

NOW = timezone.now()
HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("state", "due", "finished", "chance", "expected"),
    [
        (ChartState.QUEUED, None, None, 0.9, None),
        (ChartState.QUEUED, NOW + HOUR, None, None, ON_TRACK),
        (ChartState.QUEUED, NOW + HOUR, None, 0.49, ON_TRACK),
        (ChartState.QUEUED, NOW + HOUR, None, 0.5, AT_RISK),
        (ChartState.RUNNING, NOW + HOUR, None, 0.8, AT_RISK),
        (ChartState.PAUSED, NOW + HOUR, None, 0.8, AT_RISK),
        (ChartState.RUNNING, NOW - HOUR, None, 0.1, LATE),
        (ChartState.QUEUED, NOW - HOUR, None, None, LATE),
        (ChartState.SUCCEEDED, NOW - HOUR, NOW - 2 * HOUR, None, ON_TRACK),
        (ChartState.SUCCEEDED, NOW - HOUR, NOW, None, LATE),
        (ChartState.FAILED, NOW - HOUR, NOW, None, LATE),
        (ChartState.SUCCEEDED, NOW + HOUR, NOW, 0.9, ON_TRACK),
    ],
)
def test_promise_of(state: str, due: object, finished: object, chance: float | None, expected: str | None) -> None:
    assert (
        promise_of(state=state, due_at=due, finished_at=finished, late_chance=chance, threshold=0.5, now=NOW)  # type: ignore[arg-type]
        == expected
    )


def test_the_queryset_conditions_agree_with_the_rule_on_every_kind_of_chart(tenants: Tenants) -> None:
    """Every state, with and without a due time before and after now, finished before and after it,
    with no chance, one under and one at the (configured) threshold: the filters find exactly the
    charts the rule names, and a chart read by the selector carries the threshold."""
    config = SchedulerConfig.load()
    config.at_risk_threshold = 0.3
    config.save()
    now = timezone.now()
    dues = (None, now + HOUR, now - HOUR)
    kinds = itertools.product(ChartState.values, dues, (None, 0.2, 0.3), (None, "before", "after"))
    for index, (state, due, chance, finished) in enumerate(kinds):
        finished_at = None if finished is None or due is None else due + (HOUR if finished == "after" else -HOUR)
        finished_states = (ChartState.SUCCEEDED, ChartState.FAILED, ChartState.CANCELLED)
        plan = {} if state in finished_states else {"late_chance": chance, "position": index}
        ChartFactory(
            org=tenants.org_a, workflow=tenants.workflow, state=state, due_at=due, finished_at=finished_at, **plan
        )
    charts = list(charts_visible(org_ids=None))
    assert {chart.at_risk_threshold for chart in charts} == {0.3}  # type: ignore[attr-defined]
    by_rule = {chart.pk: chart_promise(chart, now=now) for chart in charts}
    assert {AT_RISK, LATE, ON_TRACK, None} <= set(by_rule.values())
    flags = Chart.objects.annotate(at_risk=as_flag(at_risk_q(now=now)), late=as_flag(late_q(now=now)))
    assert {pk: (at_risk, late) for pk, at_risk, late in flags.values_list("pk", "at_risk", "late")} == {
        pk: (promise == AT_RISK, promise == LATE) for pk, promise in by_rule.items()
    }
    at_risk = set(charts_visible(org_ids=None, at_risk=True, now=now).values_list("pk", flat=True))
    not_late = set(charts_visible(org_ids=None, late=False, now=now).values_list("pk", flat=True))
    assert at_risk == {pk for pk, promise in by_rule.items() if promise == AT_RISK}
    assert not_late == {pk for pk, promise in by_rule.items() if promise != LATE}


def test_without_a_config_row_the_default_threshold_holds(tenants: Tenants) -> None:
    SchedulerConfig.objects.all().delete()
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, due_at=timezone.now() + HOUR, late_chance=0.5, position=0
    )
    (read,) = charts_visible(org_ids=None)
    assert chart_promise(read, now=timezone.now()) == AT_RISK
    assert list(charts_visible(org_ids=None, at_risk=True)) == [chart]
