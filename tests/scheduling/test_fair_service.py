"""Each org's service is kept as virtual time in rounds, so that no lever distorts it: after a weight
change, hold, release, cap or pause, every backlogged org gets its weight's share from the next round
on, and an org that was idle or held joins the round under way with no credit and no debt."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from charts.models import ChartState
from charts.services import chart_prioritize
from knobs.services import scheduler_config_set
from orgs.models import Provider
from orgs.services import org_cap_set, org_hold, org_release, org_weight_set, provider_pause, provider_resume
from scheduling.dispatch import Choice, _claim
from scheduling.reconcile import _requeue
from tests.factories import OrgFactory, ProviderFactory, WorkflowFactory
from tests.scheduling.passes import ACTOR, fair_order, fake_temporal, finish, replan_and_dispatch, submit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _temporal_faked(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_temporal(monkeypatch)


def serve(rounds: int) -> list[str]:
    """Run `rounds` passes, each finishing everything it started; the orgs started, in order."""
    started: list[str] = []
    for _ in range(rounds):
        started += replan_and_dispatch()
        finish()
    return started


def test_lowering_a_weight_interleaves_by_the_new_weights_at_the_next_replan() -> None:
    scheduler_config_set(actor=ACTOR, budget=5)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme", weight=3), OrgFactory(slug="beta", weight=2)
    submit(acme, "w", 40)
    submit(beta, "w", 40)
    assert Counter(serve(4)) == {"acme": 12, "beta": 8}

    org_weight_set(org=acme, weight=2, actor=ACTOR)
    started = replan_and_dispatch()

    order = fair_order()
    assert Counter(order[:4]) == {"acme": 2, "beta": 2}, order[:12]
    assert Counter(order[:8]) == {"acme": 4, "beta": 4}, order[:12]
    assert Counter(started[:4]) == {"acme": 2, "beta": 2}


def test_raising_a_weight_gives_the_new_share_from_the_next_round() -> None:
    scheduler_config_set(actor=ACTOR, budget=4)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme", weight=2), OrgFactory(slug="beta", weight=2)
    submit(acme, "w", 40)
    submit(beta, "w", 40)
    serve(3)

    org_weight_set(org=acme, weight=6, actor=ACTOR)
    serve(1)
    order = replan_and_dispatch() and fair_order()
    assert Counter(order[:8]) == {"acme": 6, "beta": 2}, order[:16]


def test_an_idle_orgs_weight_round_trip_banks_no_debt() -> None:
    scheduler_config_set(actor=ACTOR, budget=2)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme"), OrgFactory(slug="beta")
    idle = OrgFactory(slug="idle")
    submit(acme, "w", 30)
    submit(beta, "w", 30)
    serve(5)

    org_weight_set(org=idle, weight=6, actor=ACTOR)
    replan_and_dispatch()
    org_weight_set(org=idle, weight=1, actor=ACTOR)
    finish()
    submit(idle, "w", 3)
    replan_and_dispatch()

    order = fair_order()
    assert "idle" in order[:2], order[:10]
    assert Counter(order[:6]) == {"acme": 2, "beta": 2, "idle": 2}, order[:10]


def test_an_idle_org_joins_the_round_under_way_without_credit() -> None:
    scheduler_config_set(actor=ACTOR, budget=2)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme"), OrgFactory(slug="beta")
    late = OrgFactory(slug="late")
    submit(acme, "w", 30)
    serve(6)
    submit(beta, "w", 10)
    submit(late, "w", 10)
    replan_and_dispatch()

    order = fair_order()
    # No burst for the newcomers: one chart each per round, the backlogged org included.
    assert Counter(order[:6]) == {"acme": 2, "beta": 2, "late": 2}, order[:10]


def test_a_released_org_joins_the_round_under_way() -> None:
    scheduler_config_set(actor=ACTOR, budget=2)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme"), OrgFactory(slug="beta", weight=2)
    submit(acme, "w", 30)
    submit(beta, "w", 30)
    serve(2)
    org_hold(org=beta, actor=ACTOR)
    serve(6)
    org_release(org=beta, actor=ACTOR)
    replan_and_dispatch()

    order = fair_order()
    assert Counter(order[:6]) == {"acme": 2, "beta": 4}, order[:10]


def test_a_capped_org_is_not_owed_the_rounds_its_cap_kept_it_from() -> None:
    scheduler_config_set(actor=ACTOR, budget=4)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme"), OrgFactory(slug="beta")
    submit(acme, "w", 40)
    submit(beta, "w", 40)
    org_cap_set(org=beta, max_concurrency=1, actor=ACTOR)
    for _ in range(4):  # beta keeps one chart running; acme takes the rest of the budget
        replan_and_dispatch()
        finish(orgs=["acme"])
    org_cap_set(org=beta, max_concurrency=None, actor=ACTOR)
    finish()
    replan_and_dispatch()

    order = fair_order()
    assert Counter(order[:4]) == {"acme": 2, "beta": 2}, order[:10]


def test_an_org_behind_a_paused_provider_is_not_owed_the_rounds_it_missed() -> None:
    scheduler_config_set(actor=ACTOR, budget=2)
    WorkflowFactory(name="w")
    WorkflowFactory(name="mail", provider=ProviderFactory(slug="mailer"))
    acme, beta = OrgFactory(slug="acme"), OrgFactory(slug="beta")
    submit(acme, "w", 40)
    submit(beta, "mail", 40)
    provider = Provider.objects.get(slug="mailer")
    provider_pause(provider=provider, org=beta, until=timezone.now() + timedelta(hours=1), actor=ACTOR)
    assert Counter(serve(6)) == {"acme": 12}

    provider_resume(provider=provider, org=beta, actor=ACTOR)
    replan_and_dispatch()

    order = fair_order()
    assert Counter(order[:4]) == {"acme": 2, "beta": 2}, order[:10]


def test_an_undone_claim_gives_back_exactly_what_it_added(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(**_: object) -> str:
        raise ConnectionError("Temporal is down")

    monkeypatch.setattr("scheduling.dispatch.start_chart_workflow", unreachable)
    scheduler_config_set(actor=ACTOR, budget=1)
    WorkflowFactory(name="w")
    acme = OrgFactory(slug="acme", weight=3)
    submit(acme, "w", 2)
    replan_and_dispatch()
    chart = acme.charts.get(state=ChartState.DISPATCHING)
    assert chart.service == pytest.approx(1 / 3)
    acme.refresh_from_db()
    assert acme.served == pytest.approx(1 / 3)

    # The weight changes before the reconciler undoes the claim: it gives back what was added.
    org_weight_set(org=acme, weight=1, actor=ACTOR)
    assert _requeue(chart)
    acme.refresh_from_db()
    chart.refresh_from_db()
    assert acme.served == pytest.approx(0.0)
    assert (chart.state, chart.service) == (ChartState.QUEUED, 0.0)


def test_a_high_priority_start_adds_no_service() -> None:
    scheduler_config_set(actor=ACTOR, budget=1)
    WorkflowFactory(name="w")
    acme = OrgFactory(slug="acme")
    (chart,) = submit(acme, "w", 1)
    chart_prioritize(chart=chart, high_priority=True, actor=ACTOR)
    replan_and_dispatch()
    chart.refresh_from_db()
    acme.refresh_from_db()
    assert (chart.state, chart.service, acme.served) == (ChartState.RUNNING, 0.0, 0.0)


def test_deficit_counts_cost_over_weight_and_quantum() -> None:
    scheduler_config_set(actor=ACTOR, budget=10, policy="deficit", quantum=2)
    WorkflowFactory(name="w", default_cost=3)
    acme = OrgFactory(slug="acme", weight=2)
    submit(acme, "w", 1)
    replan_and_dispatch()
    acme.refresh_from_db()
    assert acme.served == pytest.approx(3 / (2 * 2))


def test_a_lost_claim_adds_no_service() -> None:
    """A claim writes its org's virtual time before it tries the chart's row; losing the chart (it
    moved meanwhile) rolls that back."""
    WorkflowFactory(name="w")
    acme = OrgFactory(slug="acme", weight=2)
    submit(acme, "w", 1)
    chart = acme.charts.get()
    stale = acme.charts.get()
    assert _claim(Choice(chart, cost=1, service=0.0))  # the chart is claimed: the stale copy's claim loses
    acme.refresh_from_db()
    served = acme.served
    assert not _claim(Choice(stale, cost=1, service=0.5))
    acme.refresh_from_db()
    assert acme.served == served
