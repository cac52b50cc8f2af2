"""The shell's reasons, skip counters and metric labels are the core's verdicts by name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, WaitingReason
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.models import Org, Workflow
from orgs.services import provider_pause
from scheduling import dispatch as dispatch_module
from scheduling.core.dispatcher import START, UNAVAILABLE, Verdict
from scheduling.dispatch import dispatch_run
from scheduling.reasons import skip_reason, waiting_reason
from scheduling.replan import plan_refresh
from tests.conftest import Tenants
from tests.factories import ProviderFactory, WorkflowFactory

ACTOR = Actor("test", staff=True)
WAITING_VERDICTS = [verdict for verdict in Verdict if verdict not in (START, UNAVAILABLE)]


@pytest.mark.parametrize("verdict", WAITING_VERDICTS)
def test_a_verdict_is_stored_under_its_own_name(verdict: Verdict) -> None:
    for provider_paused in (False, True):
        assert waiting_reason(verdict, provider_paused=provider_paused).value == verdict.value
        assert skip_reason(verdict, provider_paused=provider_paused) == verdict.value


def test_unavailable_is_told_apart_into_a_backoff_and_a_provider_pause() -> None:
    assert waiting_reason(UNAVAILABLE, provider_paused=False) is WaitingReason.BACKOFF
    assert waiting_reason(UNAVAILABLE, provider_paused=True) is WaitingReason.PROVIDER_PAUSED
    assert skip_reason(UNAVAILABLE, provider_paused=True) == "provider_paused"


def test_every_stored_reason_but_the_shells_own_comes_from_a_verdict() -> None:
    from_verdicts = {
        waiting_reason(verdict, provider_paused=paused)
        for verdict in Verdict
        if verdict is not START
        for paused in (False, True)
    }
    assert set(WaitingReason) - from_verdicts == {WaitingReason.NOT_YET_PLANNED}


def test_a_chart_that_starts_has_no_reason_to_wait() -> None:
    with pytest.raises(ValueError, match="does not wait"):
        waiting_reason(START, provider_paused=False)


@pytest.fixture
def quiet_temporal(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Starts recorded instead of sent to Temporal."""
    started: list[dict[str, Any]] = []

    def start(**workflow: Any) -> str:
        started.append(workflow)
        return "run"

    monkeypatch.setattr(dispatch_module, "start_chart_workflow", start)
    return started


def submit(org: Org, workflow: Workflow, name: str) -> Chart:
    ((chart, _),) = chart_submit_bulk(org=org, items=[ChartRequest(workflow.name, name)], actor=ACTOR)
    return chart


@pytest.mark.django_db
def test_the_dispatcher_counts_its_skips_under_the_plans_reasons(
    tenants: Tenants, quiet_temporal: list[dict[str, Any]]
) -> None:
    scheduler_config_set(actor=ACTOR, budget=10)
    backing_off = submit(tenants.org_a, tenants.workflow, "backing-off")
    Chart.objects.filter(pk=backing_off.pk).update(available_at=timezone.now() + timedelta(minutes=10))
    paused_provider = ProviderFactory(slug="gpu-east")
    provider_pause(provider=paused_provider, until=timezone.now() + timedelta(minutes=10), actor=ACTOR)
    throttled_workflow = WorkflowFactory(name="throttled", provider=paused_provider)
    submit(tenants.org_a, throttled_workflow, "throttled")
    Org.objects.filter(pk=tenants.org_b.pk).update(max_concurrency=1)
    submit(tenants.org_b, tenants.workflow, "b0")
    submit(tenants.org_b, tenants.workflow, "b1")
    plan_refresh()

    result = dispatch_run()

    assert len(result.started) == 1
    assert result.skips == {"backoff": 1, "provider_paused": 1, "org_cap": 1}
    assert {reason for _, reason in result.org_skips} <= set(WaitingReason.values)


@pytest.mark.django_db
def test_the_head_of_the_line_is_counted_as_budget(tenants: Tenants, quiet_temporal: list[dict[str, Any]]) -> None:
    scheduler_config_set(actor=ACTOR, budget=1)
    for name in ("first", "second", "third"):
        submit(tenants.org_a, tenants.workflow, name)
    plan_refresh()

    result = dispatch_run()

    assert len(result.started) == 1
    assert result.skips == {"budget": 1}  # the walk stops at the head of the line
