"""The what-if preview: every lever, per-chart ETA moves, refusals; it writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, ChartState
from common.actors import Actor
from knobs.models import ConfigChange, SchedulerConfig
from orgs.models import Org, ProviderPause
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

Client = Callable[[Any], APIClient]
URL = "/api/v1/scheduler/plan-preview/"


@pytest.fixture
def queue(tenants: Tenants) -> dict[str, list[Chart]]:
    """One chart runs at a time (budget 1); acme and beta have four charts waiting each, behind `llm`."""
    SchedulerConfig.objects.update_or_create(id=1, defaults={"budget": 1})
    tenants.workflow.provider = ProviderFactory(slug="llm")
    tenants.workflow.save()
    start = timezone.now() - timedelta(minutes=5)
    charts: dict[str, list[Chart]] = {"acme": [], "beta": []}
    for index in range(4):
        for org in (tenants.org_a, tenants.org_b):
            chart = ChartFactory(org=org, workflow=tenants.workflow, state=ChartState.QUEUED)
            Chart.objects.filter(pk=chart.pk).update(created_at=start + timedelta(seconds=index))
            charts[org.slug].append(chart)
    return charts


def preview(client: APIClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(URL, body, format="json")
    assert response.status_code == 200, response.json()
    result: dict[str, Any] = response.json()
    return result


def moment(text: str | None) -> datetime:
    assert text is not None
    return datetime.fromisoformat(text)


def written() -> tuple[Any, ...]:
    """Everything a lever would write."""
    return (
        list(Chart.objects.order_by("pk").values_list("pk", "state", "priority", "high_priority", "available_at")),
        list(Org.objects.order_by("pk").values_list("pk", "weight", "max_concurrency", "queue_limit")),
        SchedulerConfig.load().budget,
        ConfigChange.objects.count(),
        ProviderPause.objects.count(),
    )


EVERY_LEVER: list[dict[str, Any]] = [
    {"weights": {"acme": 5}},
    {"hold": ["acme"]},
    {"release": ["acme"]},
    {"caps": {"acme": 1, "beta": None}},
    {"queue_limits": {"acme": 2, "beta": None}},
    {"budget": 3},
    {"policy": "deficit", "quantum": 2.5},
    {"aging_step": 30, "aging_cap": 5},
    {"aging_step": None},
    {"costs": [{"org": "beta", "workflow": "render", "cost": 3}]},
    {"costs": [{"org": "beta", "workflow": "render", "cost": None}]},
    {"provider_pauses": [{"provider": "llm", "org": "acme", "until": "2099-01-01T00:00:00Z"}]},
    {"provider_resumes": [{"provider": "llm"}]},
]


@pytest.mark.parametrize("body", EVERY_LEVER, ids=lambda body: "+".join(body))
def test_every_lever_previews_and_writes_nothing(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]], body: dict[str, Any]
) -> None:
    before = written()

    result = preview(client_for(tenants.staff), body)

    assert set(result) == {"orgs", "global", "charts_moved", "charts"}
    assert set(result["orgs"]) == {"acme", "beta"}
    assert written() == before


def test_hold_lists_the_held_orgs_charts_as_unplanned_first(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]
) -> None:
    result = preview(client_for(tenants.staff), {"hold": ["acme"]})

    acme_ids = {chart.pk for chart in queue["acme"]}
    assert result["orgs"]["acme"]["charts_unplanned"] == 4
    assert result["orgs"]["acme"]["after"] is None
    assert {move["id"] for move in result["charts"][:4]} == acme_ids
    assert all(move["after"] is None and move["moved_seconds"] is None for move in result["charts"][:4])
    assert result["orgs"]["beta"]["charts_earlier"] > 0
    assert all(move["moved_seconds"] < 0 for move in result["charts"][4:])


def test_priority_moves_one_chart_to_the_front(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]
) -> None:
    last = queue["beta"][-1]

    result = preview(client_for(tenants.staff), {"priorities": [{"chart": last.pk, "high_priority": True}]})

    moved = {move["id"]: move for move in result["charts"]}
    assert moved[last.pk]["moved_seconds"] < 0
    assert result["charts"][0]["id"] == last.pk  # the one that moves most
    assert result["orgs"]["beta"]["charts_earlier"] >= 1
    assert result["orgs"]["acme"]["charts_later"] >= 1


def test_provider_pause_pushes_every_chart_past_it(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]
) -> None:
    until = timezone.now() + timedelta(hours=2)

    result = preview(client_for(tenants.staff), {"provider_pauses": [{"provider": "llm", "until": until.isoformat()}]})

    assert result["charts_moved"] == 8
    assert all(moment(move["after"]) > until for move in result["charts"])
    for slug in ("acme", "beta"):
        assert result["orgs"][slug]["charts_later"] == 4
        assert moment(result["orgs"][slug]["after"]) > until


def test_provider_resume_previews_the_pause_lifted(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]
) -> None:
    until = timezone.now() + timedelta(hours=2)
    ProviderPause.objects.create(provider=tenants.workflow.provider, org=tenants.org_a, until=until)

    result = preview(client_for(tenants.staff), {"provider_resumes": [{"provider": "llm", "org": "acme"}]})

    assert moment(result["orgs"]["acme"]["before"]) > until
    assert moment(result["orgs"]["acme"]["after"]) < until
    assert result["orgs"]["acme"]["charts_earlier"] == 4
    assert ProviderPause.objects.count() == 1


def test_budget_and_cap_together(tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]) -> None:
    wide = preview(client_for(tenants.staff), {"budget": 8})
    capped = preview(client_for(tenants.staff), {"budget": 8, "caps": {"acme": 1}})

    assert moment(wide["global"]["after"]) < moment(wide["global"]["before"])

    def gain(result: dict[str, Any], slug: str) -> float:
        """How much earlier the org clears (each preview plans from its own instant)."""
        org = result["orgs"][slug]
        return (moment(org["before"]) - moment(org["after"])).total_seconds()

    assert gain(capped, "acme") < gain(wide, "acme")
    assert gain(capped, "beta") == pytest.approx(gain(wide, "beta"), abs=0.5)


def test_weights_favour_the_heavier_org(tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]) -> None:
    result = preview(client_for(tenants.staff), {"weights": {"acme": 1, "beta": 8}})

    assert moment(result["orgs"]["beta"]["after"]) < moment(result["orgs"]["beta"]["before"])
    assert result["orgs"]["beta"]["most_earlier_seconds"] > 0


def test_queue_limit_says_when_the_queue_is_full(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]]
) -> None:
    result = preview(client_for(tenants.staff), {"queue_limits": {"acme": 4, "beta": 5}})

    assert result["orgs"]["acme"]["queue_full"] is True
    assert result["orgs"]["beta"]["queue_full"] is False
    assert result["orgs"]["acme"]["queued"] == 4
    assert result["charts_moved"] == 0  # a limit refuses new charts; it moves none already queued


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"weigths": {"acme": 2}}, "weigths"),
        ({"retry_budget_share": 0.2}, "retry_budget_share"),
        ({"caps": {"acme": 0}}, "caps"),
        ({"caps": {"nope": 1}}, "org"),
        ({"queue_limits": {"acme": -1}}, "queue_limits"),
        ({"policy": "lottery"}, "policy"),
        ({"quantum": 0}, "quantum"),
        ({"aging_cap": -1}, "aging_cap"),
        ({"priorities": [{"chart": 999999, "priority": 3}]}, "priorities"),
        ({"priorities": [{"chart": 1}]}, "priorities"),
        ({"priorities": [{"chart": 1, "priority": 1, "colour": "red"}]}, "priorities"),
        ({"provider_pauses": [{"provider": "nope", "until": "2099-01-01T00:00:00Z"}]}, "provider"),
        ({"provider_pauses": [{"provider": "llm"}]}, "provider_pauses"),
        ({"provider_pauses": [{"provider": "llm", "until": "2001-01-01T00:00:00Z"}]}, "provider_pauses"),
        ({"provider_resumes": [{"provider": "llm", "org": "nope"}]}, "org"),
        ({"costs": [{"org": "acme", "workflow": "nope", "cost": 2}]}, "workflow"),
    ],
)
def test_refuses_what_it_does_not_know(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]], body: dict[str, Any], field: str
) -> None:
    response = client_for(tenants.staff).post(URL, body, format="json")

    assert response.status_code == 400, response.json()
    assert field in response.json()


@pytest.mark.parametrize("who", ["member_a", "member_b", "outsider", None])
def test_only_staff_preview(tenants: Tenants, client_for: Client, who: str | None) -> None:
    client = client_for(getattr(tenants, who) if who else None)

    response = client.post(URL, {"hold": ["beta"]}, format="json")

    assert response.status_code in {401, 403} if who is None else response.status_code == 403


def test_the_preview_is_the_plan_the_levers_would_give(
    tenants: Tenants, client_for: Client, queue: dict[str, list[Chart]], django_capture_on_commit_callbacks: Any
) -> None:
    """Preview several levers at one instant, then pull them for real and replan at that instant:
    every org's clear-time and every listed chart's ETA are the ones previewed."""
    from charts.services import chart_prioritize
    from knobs.services import scheduler_config_set
    from orgs import services as org_services
    from scheduling.replan import plan_refresh
    from scheduling.what_if import plan_preview

    instant = timezone.now()
    until = instant + timedelta(minutes=30)
    last = queue["beta"][-1]
    preview_of = plan_preview(
        changes={
            "weights": {"beta": 3},
            "budget": 2,
            "caps": {"acme": 1},
            "priorities": [{"chart": last.pk, "priority": 50}],
            "provider_pauses": [{"provider": "llm", "org": "acme", "until": until}],
        },
        now=instant,
    )

    org_services.org_weight_set(org=tenants.org_b, weight=3, actor=Actor("test", staff=True))
    org_services.org_cap_set(org=tenants.org_a, max_concurrency=1, actor=Actor("test", staff=True))
    scheduler_config_set(budget=2, actor=Actor("test", staff=True))
    chart_prioritize(chart=last, priority=50, actor=Actor("test", staff=True))
    org_services.provider_pause(
        provider=tenants.workflow.provider, org=tenants.org_a, until=until, actor=Actor("test", staff=True)
    )
    plan_refresh(now=instant)

    assert preview_of["charts_moved"] > 0
    for org in Org.objects.filter(slug__in=["acme", "beta"]):
        expected = preview_of["orgs"][org.slug]["after"]
        assert org.clear_at is not None
        assert abs((org.clear_at - moment(expected)).total_seconds()) < 1e-3, org.slug
    etas = dict(Chart.objects.values_list("pk", "plan__eta"))
    for move in preview_of["charts"]:
        assert abs((etas[move["id"]] - moment(move["after"])).total_seconds()) < 1e-3, move


def reference_moves(before: Any, after: Any, org_of: dict[str, str]) -> tuple[list[tuple[float, str]], dict[str, Any]]:
    """The moves read one chart at a time from the plans' mappings (the what-if's reading before it
    worked on whole arrays): every chart whose ETA moves by 1 s or more, largest first then by id,
    and per org [earlier, later, unplanned, most earlier, most later]."""
    import math

    moves = []
    per_org: dict[str, list[float]] = {}
    for chart_id, was in before.eta.items():
        will_be = after.eta[chart_id]
        delta = None if was is None or will_be is None else will_be - was
        if was == will_be or (delta is not None and abs(delta) < 1):
            continue
        moves.append((math.inf if delta is None else abs(delta), chart_id))
        counts = per_org.setdefault(org_of[chart_id], [0, 0, 0, 0.0, 0.0])
        if delta is None:
            counts[2 if will_be is None else 0] += 1
        elif delta < 0:
            counts[0] += 1
            counts[3] = max(counts[3], -delta)
        else:
            counts[1] += 1
            counts[4] = max(counts[4], delta)
    moves.sort(key=lambda move: (-move[0], move[1]))
    return moves, per_org


@pytest.mark.parametrize(
    "changes", [{"weights": {"beta": 5}}, {"hold": ["acme"]}, {"budget": 3, "caps": {"beta": 1}}], ids=str
)
def test_the_moves_are_those_of_each_chart(
    tenants: Tenants, queue: dict[str, list[Chart]], changes: dict[str, Any]
) -> None:
    """The preview's moves, counted on whole arrays, are those read chart by chart from both plans
    (a running chart included)."""
    from scheduling.what_if import _moves, what_if_after, what_if_base

    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=timezone.now())
    for index in range(20):
        chart = ChartFactory(org=tenants.org_a if index % 3 else tenants.org_b, workflow=tenants.workflow)
        Chart.objects.filter(pk=chart.pk).update(created_at=timezone.now() - timedelta(seconds=index))
    base = what_if_base()
    after = what_if_after(base, changes)

    result = _moves(base, after)

    slug_of = {str(org.pk): org.slug for org in Org.objects.all()}
    org_of = {pk: slug_of[str(org)] for pk, org in Chart.objects.values_list("pk", "org_id")}
    moves, per_org = reference_moves(base.before, after.after, org_of)
    assert result["charts_moved"] == len(moves) > 0
    assert [move["id"] for move in result["charts"]] == [int(chart_id) for _, chart_id in moves[:25]]
    for slug, (earlier, later, unplanned, most_earlier, most_later) in per_org.items():
        org = result["orgs"][slug]
        assert (org["charts_earlier"], org["charts_later"], org["charts_unplanned"]) == (earlier, later, unplanned)
        assert org["most_earlier_seconds"] == round(most_earlier, 3)
        assert org["most_later_seconds"] == round(most_later, 3)


def test_previews_of_one_plan_version_share_its_base(tenants: Tenants, queue: dict[str, list[Chart]]) -> None:
    """Between two replans the what-if reads the snapshot and plans it once: a lever pulled through
    its service, or a replan, makes a new plan version and a new base; before any replan, none is kept."""
    from orgs.services import org_weight_set
    from scheduling.replan import plan_refresh
    from scheduling.snapshot import org_key
    from scheduling.what_if import what_if_base

    assert what_if_base() is not what_if_base()  # no replan yet: nothing to key a base by
    plan_refresh()
    first = what_if_base()
    assert what_if_base() is first

    org_weight_set(org=tenants.org_a, weight=3, actor=Actor.system("test"))
    pulled = what_if_base()
    assert pulled is not first
    assert pulled.rows[org_key(tenants.org_a.pk)].weight == 3

    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.QUEUED)
    assert what_if_base() is pulled  # a new chart waits for the replan it asks for
    plan_refresh()
    assert len(what_if_base().snapshot.scenario.queued) == len(pulled.snapshot.scenario.queued) + 1


def test_the_per_pair_levers_give_each_chart_its_pairs_value(tenants: Tenants, queue: dict[str, list[Chart]]) -> None:
    """The cost and pause levers, asked once per (org, workflow), give every waiting chart the value
    of its own pair, as asking chart by chart does."""
    from orgs.models import Workflow
    from scheduling.what_if import _per_pair, what_if_base

    other = Workflow.objects.create(name="other", workflow_type="fairsched.demo", task_queue="q", default_cost=2)
    for index in range(5):
        ChartFactory(org=tenants.org_a if index % 2 else tenants.org_b, workflow=other, state=ChartState.QUEUED)
    snapshot = what_if_base().snapshot

    def value_of(org_id: int, workflow_id: int) -> float | None:
        return None if org_id == tenants.org_a.pk and workflow_id == other.pk else org_id * 1000.0 + workflow_id

    pairs = zip(snapshot.waiting.org_id.tolist(), snapshot.waiting.workflow_id.tolist(), strict=True)
    expected = [value_of(org_id, workflow_id) for org_id, workflow_id in pairs]
    got = _per_pair(snapshot, value_of).tolist()
    assert len(got) == 13
    assert [None if value != value else value for value in got] == expected
