"""The dashboard's page, its JSON and its levers: staff only, one service per lever, clear 400s."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartState
from common import events
from orgs.models import Org, OrgChange, ProviderPause, WorkflowCost
from scheduling.models import ConfigChange, SchedulerConfig
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.factories import ChartFactory, ProviderFactory

pytestmark = pytest.mark.django_db


def post(client: Client, path: str, body: Any = None) -> Any:
    return client.post(f"/dashboard/{path}", json.dumps(body or {}), content_type="application/json")


# The page and its reads ----------------------------------------------------------------------------


def test_the_page_sends_anonymous_users_to_the_login(client: Client) -> None:
    response = client.get("/dashboard/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=/dashboard/")


def test_the_page_refuses_non_staff(member_client: Client) -> None:
    assert member_client.get("/dashboard/").status_code == 403


def test_the_page_inlines_its_first_state(staff_client: Client, tenants: Tenants) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 150)
    response = staff_client.get("/dashboard/")
    assert response.status_code == 200
    initial = response.context["initial"]
    assert [row["position"] for row in initial["queue"]["rows"]] == list(range(100))
    assert initial["queue"]["total"] == 150
    assert {org["slug"] for org in initial["orgs"]} == {"acme", "beta"}
    assert b'id="dashboard-initial"' in response.content
    assert b'name="csrf-token"' in response.content


@pytest.mark.parametrize("path", ["state/", "queue/"])
def test_the_json_refuses_anonymous_and_non_staff(client: Client, member_client: Client, path: str) -> None:
    assert client.get(f"/dashboard/{path}").status_code == 403
    assert member_client.get(f"/dashboard/{path}").status_code == 403


def test_state_returns_the_parts_asked_for(staff_client: Client, tenants: Tenants) -> None:
    body = staff_client.get("/dashboard/state/?parts=summary,orgs").json()
    assert set(body) == {"summary", "orgs"}
    assert body["summary"]["budget"] == SchedulerConfig.load().budget
    response = staff_client.get("/dashboard/state/?parts=summary,secrets")
    assert response.status_code == 400
    assert "secrets" in response.json()["parts"][0]


def test_queue_pages_by_position_and_by_org(staff_client: Client, tenants: Tenants) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 300)
    page = staff_client.get("/dashboard/queue/?start=200&limit=50").json()
    assert [row["position"] for row in page["rows"]] == list(range(200, 250))
    assert page["total"] == 300
    beta = staff_client.get("/dashboard/queue/?org=beta&offset=10&limit=5").json()
    assert [row["position"] for row in beta["rows"]] == [21, 23, 25, 27, 29]
    assert {row["org"] for row in beta["rows"]} == {"beta"}
    assert beta["total"] == 150


def test_queue_names_a_bad_parameter(staff_client: Client, tenants: Tenants) -> None:
    response = staff_client.get("/dashboard/queue/?start=abc")
    assert response.status_code == 400
    assert "start" in response.json()
    response = staff_client.get("/dashboard/queue/?org=nobody")
    assert response.status_code == 404
    assert "org" in response.json()


def test_queue_shows_the_org_cost_override(staff_client: Client, tenants: Tenants) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 4)
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=7)
    rows = staff_client.get("/dashboard/queue/").json()["rows"]
    assert {(row["org"], row["cost"]) for row in rows} == {("acme", 7), ("beta", 1)}


# Levers: who may pull them ---------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["anonymous", "member"])
def test_levers_refuse_anyone_but_staff(client: Client, member_client: Client, tenants: Tenants, who: str) -> None:
    caller = client if who == "anonymous" else member_client
    response = post(caller, "levers/orgs/acme/hold/")
    assert response.status_code == 403
    assert Org.objects.get(slug="acme").weight == 2
    assert post(caller, "levers/budget/", {"budget": 99}).status_code == 403
    assert SchedulerConfig.load().budget != 99


def test_levers_keep_csrf(tenants: Tenants) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenants.staff)
    assert post(client, "levers/orgs/acme/hold/").status_code == 403
    token = str(client.get("/dashboard/").context["csrf_token"])
    response = client.post(
        "/dashboard/levers/orgs/acme/hold/", "{}", content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert response.status_code == 200
    assert Org.objects.get(slug="acme").is_held


def test_levers_are_post_only_and_need_a_json_object(staff_client: Client, tenants: Tenants) -> None:
    assert staff_client.get("/dashboard/levers/orgs/acme/hold/").status_code == 405
    bad = staff_client.post("/dashboard/levers/budget/", "{nope", content_type="application/json")
    assert bad.status_code == 400
    assert "JSON" in bad.json()["detail"][0]
    assert post(staff_client, "levers/budget/", [1]).status_code == 400


# Levers: each calls its service ---------------------------------------------------------------------------


def _last_change(org: Org) -> OrgChange:
    change = OrgChange.objects.filter(org=org).first()
    assert change is not None
    return change


def test_hold_and_release(staff_client: Client, tenants: Tenants) -> None:
    assert post(staff_client, "levers/orgs/acme/hold/", {"reason": "noisy"}).json() == {"ok": True}
    acme = Org.objects.get(slug="acme")
    assert acme.weight == 0
    change = _last_change(acme)
    assert (change.field, change.actor, change.new_value, change.reason) == ("hold", "user:stella", "held", "noisy")
    assert post(staff_client, "levers/orgs/acme/release/").status_code == 200
    acme.refresh_from_db()
    assert acme.weight == 2
    assert _last_change(acme).old_value == "held"


def test_weight(staff_client: Client, tenants: Tenants) -> None:
    assert post(staff_client, "levers/orgs/beta/weight/", {"weight": 5}).status_code == 200
    beta = Org.objects.get(slug="beta")
    assert beta.weight == 5
    assert (_last_change(beta).field, _last_change(beta).new_value) == ("weight", "5")


@pytest.mark.parametrize(
    ("body", "needle"),
    [({"weight": -1}, "between 0 and"), ({"weight": "abc"}, "whole number"), ({}, "weight is required")],
)
def test_a_bad_weight_is_a_400_naming_the_field(
    staff_client: Client, tenants: Tenants, body: dict[str, Any], needle: str
) -> None:
    response = post(staff_client, "levers/orgs/beta/weight/", body)
    assert response.status_code == 400
    assert needle in response.json()["weight"][0]
    assert Org.objects.get(slug="beta").weight == 1
    assert not OrgChange.objects.filter(field="weight").exists()


def test_cap_and_queue_limit(staff_client: Client, tenants: Tenants) -> None:
    assert post(staff_client, "levers/orgs/acme/cap/", {"max_concurrency": 3}).status_code == 200
    assert post(staff_client, "levers/orgs/acme/queue-limit/", {"queue_limit": 100}).status_code == 200
    acme = Org.objects.get(slug="acme")
    assert (acme.max_concurrency, acme.queue_limit) == (3, 100)
    assert set(OrgChange.objects.filter(org=acme).values_list("field", flat=True)) == {"max_concurrency", "queue_limit"}
    assert post(staff_client, "levers/orgs/acme/cap/", {"max_concurrency": None}).status_code == 200
    assert Org.objects.get(slug="acme").max_concurrency is None
    response = post(staff_client, "levers/orgs/acme/cap/", {"max_concurrency": 0})
    assert response.status_code == 400
    assert "max_concurrency" in response.json()
    response = post(staff_client, "levers/orgs/acme/queue-limit/", {"queue_limit": "lots"})
    assert response.status_code == 400
    assert "queue_limit" in response.json()


def test_cost(staff_client: Client, tenants: Tenants) -> None:
    assert post(staff_client, "levers/orgs/acme/cost/", {"workflow": "render", "cost": 4}).status_code == 200
    assert WorkflowCost.objects.get(org=tenants.org_a, workflow=tenants.workflow).cost == 4
    assert _last_change(tenants.org_a).field == "cost:render"
    response = post(staff_client, "levers/orgs/acme/cost/", {"workflow": "render", "cost": 0})
    assert response.status_code == 400
    assert "cost" in response.json()
    response = post(staff_client, "levers/orgs/acme/cost/", {"workflow": "nope", "cost": 2})
    assert response.status_code == 404
    assert "workflow" in response.json()
    assert post(staff_client, "levers/orgs/acme/cost/", {"workflow": "render", "cost": None}).status_code == 200
    assert not WorkflowCost.objects.exists()


def test_an_unknown_org_is_a_404_naming_the_org(staff_client: Client, tenants: Tenants) -> None:
    response = post(staff_client, "levers/orgs/nobody/hold/")
    assert response.status_code == 404
    assert "org" in response.json()


def test_budget_and_policy(staff_client: Client, tenants: Tenants) -> None:
    assert post(staff_client, "levers/budget/", {"budget": 42}).status_code == 200
    assert post(staff_client, "levers/policy/", {"policy": "deficit", "quantum": 2}).status_code == 200
    config = SchedulerConfig.load()
    assert (config.budget, config.policy, config.quantum) == (42, "deficit", 2.0)
    assert set(ConfigChange.objects.values_list("field", "actor")) == {
        ("budget", "user:stella"),
        ("policy", "user:stella"),
        ("quantum", "user:stella"),
    }
    response = post(staff_client, "levers/budget/", {"budget": 0})
    assert response.status_code == 400
    assert "budget" in response.json()
    response = post(staff_client, "levers/policy/", {"policy": "lottery"})
    assert response.status_code == 400
    assert "lottery" in response.json()["policy"][0]
    assert SchedulerConfig.load().budget == 42


@pytest.fixture
def chart(tenants: Tenants) -> Chart:
    return ChartFactory(org=tenants.org_a, workflow=tenants.workflow, position=0)


def test_pause_resume_and_cancel(staff_client: Client, chart: Chart) -> None:
    assert post(staff_client, f"levers/charts/{chart.pk}/pause/").status_code == 200
    chart.refresh_from_db()
    assert chart.state == ChartState.PAUSED
    assert post(staff_client, f"levers/charts/{chart.pk}/resume/").status_code == 200
    assert post(staff_client, f"levers/charts/{chart.pk}/cancel/", {"reason": "duplicate"}).status_code == 200
    chart.refresh_from_db()
    assert chart.state == ChartState.CANCELLED
    assert list(ChartEvent.objects.filter(chart=chart).order_by("id").values_list("to_state", "actor")) == [
        ("paused", "user:stella"),
        ("queued", "user:stella"),
        ("cancelled", "user:stella"),
    ]
    again = post(staff_client, f"levers/charts/{chart.pk}/cancel/")
    assert again.status_code == 409
    assert "cancelled" in again.json()["state"][0]


def test_high_priority_and_move_to_top(staff_client: Client, chart: Chart, tenants: Tenants) -> None:
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, priority=7)
    assert post(staff_client, f"levers/charts/{chart.pk}/priority/", {"high_priority": True}).status_code == 200
    chart.refresh_from_db()
    assert chart.high_priority
    assert post(staff_client, f"levers/charts/{chart.pk}/top/").status_code == 200
    chart.refresh_from_db()
    assert chart.priority == 8
    response = post(staff_client, f"levers/charts/{chart.pk}/priority/", {"high_priority": "yes"})
    assert response.status_code == 400
    assert "high_priority" in response.json()
    assert post(staff_client, "levers/charts/999999/top/").status_code == 404


def test_provider_pause_and_resume(staff_client: Client, tenants: Tenants) -> None:
    provider = ProviderFactory(slug="openai")
    until = (timezone.now() + timedelta(minutes=30)).isoformat()
    response = post(staff_client, "levers/providers/openai/pause/", {"until": until, "org": "acme", "reason": "429s"})
    assert response.status_code == 200
    pause = ProviderPause.objects.get(provider=provider)
    assert (pause.org, pause.created_by, pause.reason) == (tenants.org_a, "user:stella", "429s")
    assert _last_change(tenants.org_a).field == "provider:openai"
    assert post(staff_client, "levers/providers/openai/pause/", {"until": until}).status_code == 200
    assert ProviderPause.objects.filter(org=None).count() == 1
    assert post(staff_client, "levers/providers/openai/resume/", {"org": "acme"}).json() == {"ok": True, "ended": 1}
    assert ProviderPause.objects.filter(until__gt=timezone.now()).count() == 1


@pytest.mark.parametrize(
    ("until", "needle"),
    [("tomorrow", "ISO 8601"), ("2020-01-01T00:00:00+00:00", "future"), ("2999-01-01T00:00:00", "time zone")],
)
def test_a_bad_pause_end_is_a_400_naming_until(staff_client: Client, tenants: Tenants, until: str, needle: str) -> None:
    ProviderFactory(slug="openai")
    response = post(staff_client, "levers/providers/openai/pause/", {"until": until})
    assert response.status_code == 400
    assert needle in response.json()["until"][0]
    assert not ProviderPause.objects.exists()


def test_a_lever_announces_its_change_to_the_staff_group(
    staff_client: Client, tenants: Tenants, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(events, "broadcast", lambda group, message: sent.append((group, message)))
    with django_capture_on_commit_callbacks(execute=True):
        post(staff_client, "levers/orgs/acme/hold/")
    assert (events.STAFF_GROUP, {"kind": "org", "org": tenants.org_a.pk}) in sent


# What-if ---------------------------------------------------------------------------------------------


def test_what_if_returns_the_core_preview(
    staff_client: Client, tenants: Tenants, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scheduling import services

    seen: list[dict[str, Any]] = []

    def preview(*, changes: dict[str, Any]) -> dict[str, Any]:
        seen.append(changes)
        return {"orgs": {"acme": {"before": None, "after": None}}, "global": {"before": None, "after": None}}

    monkeypatch.setattr(services, "plan_preview", preview)
    changes = {"weights": {"acme": 5}, "budget": 3, "hold": ["beta"]}
    response = post(staff_client, "what-if/", {"changes": changes})
    assert response.status_code == 200
    assert response.json()["preview"]["orgs"] == {"acme": {"before": None, "after": None}}
    assert seen == [changes]


def test_what_if_on_the_real_core_moves_clear_times(staff_client: Client, tenants: Tenants) -> None:
    from scheduling.replan import plan_refresh

    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 40)
    plan_refresh()
    response = post(staff_client, "what-if/", {"changes": {"hold": ["acme"], "budget": 20}})
    assert response.status_code == 200
    preview = response.json()["preview"]
    assert preview["orgs"]["beta"]["after"] < preview["orgs"]["beta"]["before"]
    assert preview["orgs"]["acme"]["after"] is None
    assert not ConfigChange.objects.exists()
    assert Org.objects.get(slug="acme").weight == 2


def test_what_if_names_a_bad_change(staff_client: Client, tenants: Tenants) -> None:
    response = post(staff_client, "what-if/", {"changes": {"budget": 0}})
    assert response.status_code == 400
    assert "budget" in response.json()
    assert post(staff_client, "what-if/", {}).json() == {"changes": ["changes is required"]}
    assert post(Client(), "what-if/", {"changes": {}}).status_code == 403


def test_what_if_takes_every_lever_and_names_what_it_refuses(staff_client: Client, tenants: Tenants) -> None:
    from scheduling.replan import plan_refresh

    tenants.workflow.provider = ProviderFactory(slug="llm")
    tenants.workflow.save()
    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 10)
    plan_refresh()
    every = {
        "weights": {"acme": 3},
        "caps": {"beta": 1},
        "queue_limits": {"acme": 5},
        "budget": 4,
        "policy": "deficit",
        "quantum": 2.0,
        "aging_step": 60.0,
        "aging_cap": 3,
        "costs": [{"org": "acme", "workflow": "render", "cost": 2}],
        "priorities": [{"chart": charts[-1].pk, "priority": 5}],
        "provider_pauses": [{"provider": "llm", "org": "beta", "until": "2099-01-01T00:00:00+00:00"}],
        "provider_resumes": [{"provider": "llm"}],
        "hold": [],
        "release": [],
    }
    response = post(staff_client, "what-if/", {"changes": every})
    assert response.status_code == 200, response.json()
    preview = response.json()["preview"]
    assert preview["orgs"]["beta"]["after"] is not None
    assert preview["orgs"]["acme"]["queue_full"] is True
    assert preview["charts"]
    assert not ConfigChange.objects.exists()
    for changes, field in [
        ({"weigths": {"acme": 2}}, "weigths"),
        ({"caps": {"acme": 0}}, "caps"),
        ({"caps": ["acme"]}, "caps"),
        ({"policy": "fifo"}, "policy"),
        ({"priorities": [{"chart": "x", "priority": 1}]}, "priorities"),
        ({"priorities": ["x"]}, "priorities"),
        ({"provider_pauses": [{"provider": "nope", "until": "2099-01-01T00:00:00+00:00"}]}, "provider_pauses"),
        ({"provider_pauses": [{"provider": "llm", "until": "tomorrow"}]}, "provider_pauses"),
        ({"provider_resumes": [{"provider": "llm", "org": "nope"}]}, "provider_resumes"),
        ({"costs": [{"org": "acme", "workflow": "render", "cost": 2, "by": "me"}]}, "costs"),
    ]:
        refused = post(staff_client, "what-if/", {"changes": changes})
        assert refused.status_code == 400, changes
        assert field in refused.json(), (changes, refused.json())


def test_the_page_and_its_refetch_run_a_fixed_number_of_queries(
    staff_client: Client, tenants: Tenants, django_assert_max_num_queries: Any
) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 300)
    SchedulerConfig.load()
    with django_assert_max_num_queries(22):
        assert staff_client.get("/dashboard/").status_code == 200
    with django_assert_max_num_queries(10):
        assert staff_client.get("/dashboard/state/?parts=summary,orgs,outside").status_code == 200
    with django_assert_max_num_queries(4):
        assert staff_client.get("/dashboard/queue/?start=120").status_code == 200


def _every_dashboard_url() -> list[tuple[str, str]]:
    from django.urls import reverse

    from scheduling.urls import urlpatterns

    examples = {"slug": "acme", "pk": 1}
    urls = []
    for pattern in urlpatterns:
        kwargs = {name: examples[name] for name in pattern.pattern.converters}
        urls.append((str(pattern.name), reverse(f"dashboard:{pattern.name}", kwargs=kwargs)))
    return urls


@pytest.mark.parametrize(("name", "url"), _every_dashboard_url())
def test_every_dashboard_url_refuses_a_customer(member_client: Client, name: str, url: str) -> None:
    for response in (member_client.get(url), member_client.post(url, "{}", content_type="application/json")):
        assert response.status_code in (403, 405), name
    assert Org.objects.get(slug="acme").weight == 2
