"""The rescue: the smallest change of weights, budget and high tier that clears an org's risk, on
real plans (PostgreSQL); apply through the lever services, refused when a lever moved meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, ChartEvent, ChartState
from knobs.models import ConfigChange, SchedulerConfig
from orgs.models import Org, OrgChange
from tests.conftest import Tenants
from tests.factories import ChartFactory

Client = Callable[[Any], APIClient]
URL = "/api/v1/scheduler/rescue/"
D = 60.0  # every chart's expected run (FAIRSCHED_DEFAULT_DURATION: no run learned)


def queue_of(tenants: Tenants, *, acme_due: list[float | None], beta: int, **config: Any) -> list[Chart]:
    """Budget 1 (one chart at a time) unless `config` says otherwise, both orgs of weight 1, no arrivals
    foreseen; acme's charts due `acme_due[i]` runs of D from now (None: no due time), submitted first
    one by one, then beta's `beta` charts, alternating with them by creation time. acme's charts."""
    SchedulerConfig.objects.update_or_create(
        id=1, defaults={"budget": 1, "arrival_window": 0, "rescue_max_budget": None, **config}
    )
    Org.objects.filter(pk__in=[tenants.org_a.pk, tenants.org_b.pk]).update(weight=1)
    now = timezone.now()
    start = now - timedelta(minutes=5)
    acme: list[Chart] = []
    for index in range(max(len(acme_due), beta)):
        if index < len(acme_due):
            due = acme_due[index]
            chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.QUEUED)
            Chart.objects.filter(pk=chart.pk).update(
                created_at=start + timedelta(seconds=2 * index),
                due_at=None if due is None else now + timedelta(seconds=due * D),
            )
            acme.append(chart)
        if index < beta:
            other = ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.QUEUED)
            Chart.objects.filter(pk=other.pk).update(created_at=start + timedelta(seconds=2 * index + 1))
    return acme


def rescue(client: APIClient, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = client.post(URL, body, format="json")
    assert response.status_code == status, response.json()
    answer: dict[str, Any] = response.json()
    return answer


def test_raising_the_weight_clears_the_risk(tenants: Tenants, client_for: Client) -> None:
    """Alternating with beta, acme's 4th chart finishes at 7 D, due at 5.5 D; at weight 2 or 3 at 6 D
    (beta's first, submitted before acme's second, keeps its place in the first round); at 4, 5 D."""
    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)

    answer = rescue(client_for(tenants.staff), {"org": "acme"})

    assert answer["change"] == {"weights": {"acme": 4}}
    assert (answer["at_risk_before"], answer["at_risk_after"]) == (1, 0)
    assert answer["orgs"]["acme"]["before"]["at_risk"] == 1
    assert answer["orgs"]["acme"]["after"]["at_risk"] == 0
    assert answer["orgs"]["acme"]["after"]["clear"] < answer["orgs"]["acme"]["before"]["clear"]
    assert answer["levers"] == 1
    assert answer["applied"] is False
    assert 0 < answer["plans"] <= answer["max_plans"]
    assert Org.objects.get(slug="acme").weight == 1  # nothing applied


def test_only_the_budget_clears_the_risk(tenants: Tenants, client_for: Client) -> None:
    """acme's 2nd chart, due at 1.5 D, finishes at 3 D with budget 1 whatever acme's weight (beta's
    first was submitted before it), at 2 D with budget 2: only a third unit, which starts it now,
    clears it."""
    queue_of(tenants, acme_due=[1.5, 1.5], beta=2, rescue_max_weight=10, rescue_max_budget=6)

    answer = rescue(client_for(tenants.staff), {"org": "acme"})

    assert answer["change"] == {"budget": 3}
    assert (answer["at_risk_before"], answer["at_risk_after"]) == (1, 0)


def test_when_nothing_clears_the_risk_the_least_is_answered(tenants: Tenants, client_for: Client) -> None:
    """acme's first chart is due at 0.5 D, before any run can end: it stays at risk whatever is pulled
    (the high tier too: it starts now already). Its third, due at 4.5 D, finishes at 5 D alternating
    with beta, at 4 D from weight 3."""
    queue_of(tenants, acme_due=[0.5, 3.5, 4.5], beta=3, rescue_max_weight=10)

    answer = rescue(client_for(tenants.staff), {})

    assert answer["org"] is None
    assert answer["change"] == {"weights": {"acme": 3}}
    assert (answer["at_risk_before"], answer["at_risk_after"]) == (2, 1)
    assert answer["orgs"]["beta"]["before"]["at_risk"] == answer["orgs"]["beta"]["after"]["at_risk"] == 0


def test_apply_pulls_the_levers_with_the_reason(tenants: Tenants, client_for: Client) -> None:
    queue_of(tenants, acme_due=[1.5, 1.5], beta=2, rescue_max_weight=10, rescue_max_budget=6)

    answer = rescue(client_for(tenants.staff), {"org": "acme", "apply": True, "reason": "acme's promise"})

    assert answer["applied"] is True
    assert answer["change"] == {"budget": 3}
    assert SchedulerConfig.load().budget == 3
    change = ConfigChange.objects.get(field="budget")
    assert (change.old_value, change.new_value, change.reason) == ("1", "3", "acme's promise")
    assert change.actor == "user:stella"


def test_apply_sets_the_weight_as_the_weight_lever_does(tenants: Tenants, client_for: Client) -> None:
    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)
    client = client_for(tenants.staff)
    preview = rescue(client, {"org": "acme"})

    answer = rescue(
        client, {"org": "acme", "apply": True, "reason": "rescue", "searched_from": preview["searched_from"]}
    )

    assert answer["change"] == preview["change"] == {"weights": {"acme": 4}}
    assert Org.objects.get(slug="acme").weight == 4
    line = OrgChange.objects.get(org=tenants.org_a, field="weight")
    assert (line.old_value, line.new_value, line.reason, line.actor) == ("1", "4", "rescue", "user:stella")


def test_apply_sends_charts_to_the_high_tier_as_a_last_resort(tenants: Tenants, client_for: Client) -> None:
    """Weights cannot move (max weight 1), the budget is no lever: acme's second chart, due at 2.5 D
    behind beta's two older ones (3 D), is cleared by the high tier alone."""
    SchedulerConfig.objects.update_or_create(id=1, defaults={"budget": 1, "arrival_window": 0, "rescue_max_weight": 1})
    Org.objects.filter(pk__in=[tenants.org_a.pk, tenants.org_b.pk]).update(weight=1)
    now = timezone.now()
    for index in range(2):
        other = ChartFactory(org=tenants.org_b, workflow=tenants.workflow)
        Chart.objects.filter(pk=other.pk).update(created_at=now - timedelta(minutes=10 - index))
    late = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    Chart.objects.filter(pk=late.pk).update(
        created_at=now - timedelta(minutes=5), due_at=now + timedelta(seconds=1.5 * D)
    )

    answer = rescue(client_for(tenants.staff), {"org": "acme", "apply": True, "reason": "promised"})

    assert answer["change"] == {"priorities": [{"chart": late.pk, "high_priority": True}]}
    assert (answer["at_risk_before"], answer["at_risk_after"]) == (1, 0)
    assert Chart.objects.get(pk=late.pk).high_priority is True
    assert "promised" in ChartEvent.objects.filter(chart_id=late.pk).latest("pk").reason


def test_a_lever_changed_since_the_preview_is_a_409_and_nothing_is_applied(
    tenants: Tenants, client_for: Client
) -> None:
    from common.actors import Actor
    from knobs.services import scheduler_config_set
    from orgs.services import org_weight_set

    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)
    client = client_for(tenants.staff)
    preview = rescue(client, {"org": "acme"})
    org_weight_set(org=tenants.org_a, weight=2, actor=Actor("user:otto", staff=True))
    body = {"org": "acme", "apply": True, "reason": "rescue", "searched_from": preview["searched_from"]}

    refused = rescue(client, body, status=409)

    assert "weights.acme" in refused
    assert Org.objects.get(slug="acme").weight == 2
    scheduler_config_set(budget=2, actor=Actor("user:otto", staff=True))
    body["searched_from"] = {"budget": 1}
    assert "budget" in rescue(client, body, status=409)
    assert SchedulerConfig.load().budget == 2


def test_a_lever_changed_during_the_search_is_a_conflict(tenants: Tenants) -> None:
    """The search read the weights from its snapshot; the apply compares them under the rows' locks."""
    from common.actors import Actor
    from common.errors import Conflict
    from orgs.services import org_weight_set
    from scheduling.rescue import rescue_apply, rescue_find

    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)
    found = rescue_find(org="acme")
    org_weight_set(org=tenants.org_a, weight=3, actor=Actor("user:otto", staff=True))

    with pytest.raises(Conflict) as refused:
        rescue_apply(rescue=found, actor=Actor("user:stella", staff=True), reason="rescue")

    assert refused.value.field == "weights.acme"
    assert Org.objects.get(slug="acme").weight == 3


@pytest.mark.parametrize("who", ["member_a", "member_b", "outsider", None])
def test_only_staff_rescue(tenants: Tenants, client_for: Client, who: str | None) -> None:
    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)
    client = client_for(getattr(tenants, who) if who else None)

    response = client.post(URL, {"org": "acme", "apply": True, "reason": "mine"}, format="json")

    assert response.status_code in {401, 403} if who is None else response.status_code == 403
    assert Org.objects.get(slug="acme").weight == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"org": "nope"}, "org"),
        ({"org": 3}, "org"),
        ({"apply": "yes"}, "apply"),
        ({"apply": True}, "reason"),
        ({"apply": True, "reason": "  "}, "reason"),
        ({"reason": "x" * 501}, "reason"),
        ({"searched_from": {"budget": 0}}, "searched_from"),
        ({"orgs": ["acme"]}, "orgs"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    tenants: Tenants, client_for: Client, body: dict[str, Any], field: str
) -> None:
    response = client_for(tenants.staff).post(URL, body, format="json")

    assert response.status_code == 400, response.json()
    assert field in response.json()


def test_the_search_with_a_fake_plan() -> None:
    """The search alone, each change's risk from a fake: acme's risk falls with its weight (clear from
    7) and with the budget (clear from 12, from 10 with weight 5 and up); the high tier clears one
    chart each. Single levers first, then the least of each."""
    from scheduling.rescue import Change, Levers, Risk, search

    def evaluate(change: Change) -> Risk:
        weight = change.weights.get("a", 1)
        budget = change.budget or 4
        left = max(0, min(7 - weight, 12 - budget, 10 - budget if weight >= 5 else 99)) - len(change.high_tier)
        return Risk({"a": max(0, left)}, {}, {"a": [101, 102, 103]})

    levers = Levers(budget=4, weights={"a": 1, "b": 1}, max_weight=10, max_budget=20)
    found = search(evaluate, levers=levers, before=evaluate(Change()), org="a")
    assert found.change == Change(weights={"a": 7})
    assert found.risk.count("a") == 0

    no_weights = Levers(budget=4, weights={"a": 1, "b": 1}, max_weight=1, max_budget=20)
    assert search(evaluate, levers=no_weights, before=evaluate(Change()), org="a").change == Change(budget=12)

    small = Levers(budget=4, weights={"a": 1, "b": 1}, max_weight=5, max_budget=9)
    found = search(evaluate, levers=small, before=evaluate(Change()), org="a")
    # Weight 5 alone leaves 2, budget 9 alone 3, both together 1; then one chart to the high tier.
    assert found.change == Change(weights={"a": 5}, budget=9, high_tier=(101,))
    assert found.risk.count("a") == 0

    bounded = search(evaluate, levers=levers, before=evaluate(Change()), org="a", max_plans=2)
    assert bounded.exhausted
    assert bounded.plans == 2
