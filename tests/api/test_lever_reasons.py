"""Every lever of the API takes an optional reason: stored in its history, shown to staff; a hold's
reason, written for the customer, is the only one its org's members see. A reason too long, or with a
control or invisible character, is a 400 naming `reason` with nothing written; bodies stay strict."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, ChartEvent, ChartState
from charts.services import chart_pause
from common.actors import Actor
from knobs.models import ConfigChange
from orgs.models import Org, OrgChange, ProviderPause, WorkflowCost
from orgs.services import org_hold, provider_pause
from tests.conftest import Tenants
from tests.factories import ProviderFactory

Client = Callable[[Any], APIClient]
REASON = "customer asked for a pause over the weekend"


def soon() -> str:
    return (timezone.now() + timedelta(minutes=15)).isoformat()


@pytest.fixture
def geo(tenants: Tenants) -> Any:
    return ProviderFactory(slug="geo-api")


@pytest.fixture
def staff(tenants: Tenants, client_for: Client) -> APIClient:
    return client_for(tenants.staff)


def org_history(client: APIClient, slug: str = "acme") -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/orgs/{slug}/history/")
    assert response.status_code == 200, response.content
    return list(response.json()["results"])


def config_history(client: APIClient) -> list[dict[str, Any]]:
    response = client.get("/api/v1/scheduler/config/history/")
    assert response.status_code == 200, response.content
    return list(response.json()["results"])


def chart_history(client: APIClient, chart: Chart) -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/charts/{chart.pk}/events/")
    assert response.status_code == 200, response.content
    return list(response.json()["results"])


# (lever, method, url, body): every org and scheduler lever; the chart levers are below.
ORG_LEVERS = [
    ("hold", "post", "/api/v1/orgs/acme/hold/", {}),
    ("weight", "patch", "/api/v1/orgs/acme/", {"weight": 5}),
    ("cap", "patch", "/api/v1/orgs/acme/", {"max_concurrency": 3}),
    ("queue limit", "patch", "/api/v1/orgs/acme/", {"queue_limit": 40}),
    ("cost", "put", "/api/v1/orgs/acme/costs/render/", {"cost": 4}),
]
CONFIG_LEVERS = [
    ("budget", {"budget": 7}),
    ("policy", {"policy": "deficit", "quantum": 2.0}),
]


@pytest.mark.parametrize(("lever", "method", "url", "body"), ORG_LEVERS, ids=[lever[0] for lever in ORG_LEVERS])
def test_an_org_lever_keeps_its_reason_in_the_org_s_history(
    tenants: Tenants, staff: APIClient, lever: str, method: str, url: str, body: dict[str, Any]
) -> None:
    response = getattr(staff, method)(url, {**body, "reason": f"  {REASON}  "}, format="json")

    assert response.status_code == 200, response.content
    newest = org_history(staff)[0]
    assert newest["reason"] == REASON  # stripped
    assert newest["actor"] == "user:stella"


def test_release_and_a_cost_removed_keep_their_reasons(tenants: Tenants, staff: APIClient) -> None:
    org_hold(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="unpaid invoice")
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=3)

    assert staff.post("/api/v1/orgs/acme/release/", {"reason": "paid"}, format="json").status_code == 200
    deleted = staff.delete("/api/v1/orgs/acme/costs/render/", {"reason": "back to default"}, format="json")

    assert deleted.status_code == 204, deleted.content
    assert [(c["field"], c["reason"]) for c in org_history(staff)[:2]] == [
        ("cost:render", "back to default"),
        ("hold", "paid"),
    ]


@pytest.mark.parametrize(("lever", "body"), CONFIG_LEVERS, ids=[lever[0] for lever in CONFIG_LEVERS])
def test_a_scheduler_lever_keeps_its_reason_in_the_config_history(
    tenants: Tenants, staff: APIClient, lever: str, body: dict[str, Any]
) -> None:
    response = staff.patch("/api/v1/scheduler/config/", {**body, "reason": REASON}, format="json")

    assert response.status_code == 200, response.content
    history = config_history(staff)
    assert {change["field"] for change in history} == set(body)
    assert {change["reason"] for change in history} == {REASON}
    assert ConfigChange.objects.filter(reason=REASON).count() == len(body)


@pytest.mark.parametrize(
    ("lever", "body", "reason_in_history"),
    [
        ("pause", {}, REASON),
        ("cancel", {}, REASON),
        ("move-to-top", {}, "priority set to 1; " + REASON),  # one above the org's other waiting charts
        ("prioritize", {"priority": 7}, "priority set to 7; " + REASON),
        ("prioritize", {"high_priority": True}, "high_priority set to True; " + REASON),
    ],
)
def test_a_chart_lever_keeps_its_reason_in_the_chart_s_history(
    tenants: Tenants, staff: APIClient, chart_a: Chart, lever: str, body: dict[str, Any], reason_in_history: str
) -> None:
    response = staff.post(f"/api/v1/charts/{chart_a.pk}/{lever}/", {**body, "reason": REASON}, format="json")

    assert response.status_code == 200, response.content
    assert chart_history(staff, chart_a)[-1]["reason"] == reason_in_history


def test_resume_keeps_its_reason(tenants: Tenants, staff: APIClient, chart_a: Chart) -> None:
    chart_pause(chart=chart_a, actor=Actor("user:stella", staff=True))

    response = staff.post(f"/api/v1/charts/{chart_a.pk}/resume/", {"reason": REASON}, format="json")

    assert response.status_code == 200, response.content
    assert chart_history(staff, chart_a)[-1]["reason"] == REASON


def test_provider_pause_and_resume_keep_their_reasons(tenants: Tenants, staff: APIClient, geo: Any) -> None:
    created = staff.post(
        "/api/v1/provider-pauses/",
        {"provider": "geo-api", "org": "acme", "until": soon(), "reason": "quota"},
        format="json",
    )
    assert created.status_code == 201, created.content
    ended = staff.post("/api/v1/providers/geo-api/resume/", {"org": "acme", "reason": "quota raised"}, format="json")
    assert ended.status_code == 200, ended.content
    assert ended.json() == {"ended": 1}
    provider_pause(
        provider=geo,
        org=tenants.org_a,
        until=timezone.now() + timedelta(minutes=5),
        actor=Actor("user:stella", staff=True),
    )
    pause = ProviderPause.objects.filter(until__gt=timezone.now()).get()
    assert staff.post(f"/api/v1/provider-pauses/{pause.pk}/end/", {"reason": "done"}, format="json").status_code == 200

    history = [(c["new_value"].split(" until ")[0], c["reason"]) for c in org_history(staff)]
    assert history == [("resumed", "done"), ("paused", ""), ("resumed", "quota raised"), ("paused", "quota")]


BAD_REASONS = [
    pytest.param("x" * 501, "at most 500", id="too-long"),
    pytest.param("ok\x01not", "U+0001", id="control"),
    pytest.param("two\nlines", "U+000A", id="newline"),
    pytest.param("hidden\u200bspace", "U+200B", id="zero-width"),
    pytest.param(5, "valid string", id="number"),
]
# Every lever's call, with a body it would otherwise accept.
LEVER_CALLS = [
    ("post", "/api/v1/orgs/acme/hold/", {}),
    ("post", "/api/v1/orgs/acme/release/", {}),
    ("patch", "/api/v1/orgs/acme/", {"weight": 5}),
    ("put", "/api/v1/orgs/acme/costs/render/", {"cost": 4}),
    ("delete", "/api/v1/orgs/acme/costs/render/", {}),
    ("patch", "/api/v1/scheduler/config/", {"budget": 9}),
    ("post", "/api/v1/charts/{chart}/pause/", {}),
    ("post", "/api/v1/charts/{chart}/resume/", {}),
    ("post", "/api/v1/charts/{chart}/cancel/", {}),
    ("post", "/api/v1/charts/{chart}/move-to-top/", {}),
    ("post", "/api/v1/charts/{chart}/prioritize/", {"priority": 2}),
    ("post", "/api/v1/provider-pauses/", {"provider": "geo-api", "until": "SOON"}),
    ("post", "/api/v1/providers/geo-api/resume/", {}),
]


def stored(chart: Chart) -> tuple[Any, ...]:
    return (
        list(Org.objects.values_list("slug", "weight", "max_concurrency", "queue_limit", "hold_reason")),
        OrgChange.objects.count(),
        ConfigChange.objects.count(),
        ChartEvent.objects.filter(chart=chart).count(),
        ProviderPause.objects.count(),
        Chart.objects.get(pk=chart.pk).state,
    )


@pytest.mark.parametrize(("method", "url", "body"), LEVER_CALLS, ids=[f"{c[0]} {c[1]}" for c in LEVER_CALLS])
@pytest.mark.parametrize(("reason", "says"), BAD_REASONS)
def test_a_bad_reason_is_a_400_naming_reason_and_nothing_is_written(
    tenants: Tenants,
    staff: APIClient,
    chart_a: Chart,
    geo: Any,
    method: str,
    url: str,
    body: dict[str, Any],
    reason: object,
    says: str,
) -> None:
    before = stored(chart_a)
    body = {key: soon() if value == "SOON" else value for key, value in body.items()}

    response = getattr(staff, method)(url.format(chart=chart_a.pk), {**body, "reason": reason}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["reason"]
    assert says in response.json()["reason"][0]
    assert stored(chart_a) == before


@pytest.mark.parametrize(("method", "url", "body"), LEVER_CALLS, ids=[f"{c[0]} {c[1]}" for c in LEVER_CALLS])
def test_a_lever_s_body_stays_strict(
    tenants: Tenants, staff: APIClient, chart_a: Chart, geo: Any, method: str, url: str, body: dict[str, Any]
) -> None:
    body = {key: soon() if value == "SOON" else value for key, value in body.items()}

    response = getattr(staff, method)(url.format(chart=chart_a.pk), {**body, "reasons": "typo"}, format="json")

    assert response.status_code == 400, response.content
    assert response.json() == {"reasons": ["unknown field"]}


def test_a_member_sees_the_hold_reason_and_it_is_cleared_on_release(
    tenants: Tenants, staff: APIClient, client_for: Client
) -> None:
    member = client_for(tenants.member_a)
    staff.post("/api/v1/orgs/acme/hold/", {"reason": "Paused while we migrate your data"}, format="json")

    assert member.get("/api/v1/orgs/acme/").json()["hold_reason"] == "Paused while we migrate your data"
    listed = member.get("/api/v1/orgs/").json()["results"]
    assert [(org["slug"], org["held"], org["hold_reason"]) for org in listed] == [
        ("acme", True, "Paused while we migrate your data")
    ]

    staff.post("/api/v1/orgs/acme/release/", {"reason": "migration done"}, format="json")

    assert member.get("/api/v1/orgs/acme/").json()["hold_reason"] == ""
    assert Org.objects.get(slug="acme").hold_reason == ""


def test_holding_a_held_org_again_replaces_the_reason_its_members_see(
    tenants: Tenants, staff: APIClient, client_for: Client
) -> None:
    staff.patch("/api/v1/orgs/acme/", {"weight": 0, "reason": "internal: abuse suspected"}, format="json")
    again = staff.post("/api/v1/orgs/acme/hold/", {"reason": "Paused while we check your usage"}, format="json")

    assert again.status_code == 200
    assert client_for(tenants.member_a).get("/api/v1/orgs/acme/").json()["hold_reason"] == (
        "Paused while we check your usage"
    )
    assert [(c["field"], c["old_value"], c["new_value"], c["reason"]) for c in org_history(staff)[:2]] == [
        ("hold", "held", "held", "Paused while we check your usage"),
        ("weight", "2", "0", "internal: abuse suspected"),
    ]
    # The same again, or none: nothing changes.
    staff.post("/api/v1/orgs/acme/hold/", {"reason": "Paused while we check your usage"}, format="json")
    staff.post("/api/v1/orgs/acme/hold/", {}, format="json")
    assert len(org_history(staff)) == 2
    assert Org.objects.get(slug="acme").hold_reason == "Paused while we check your usage"


def test_a_hold_by_weight_0_shows_the_member_no_reason(tenants: Tenants, staff: APIClient, client_for: Client) -> None:
    staff.patch("/api/v1/orgs/acme/", {"weight": 0, "reason": "internal: abuse suspected"}, format="json")

    body = client_for(tenants.member_a).get("/api/v1/orgs/acme/").json()

    assert (body["held"], body["hold_reason"]) == (True, "")
    assert "abuse" not in str(body)


def test_a_tenant_sees_no_other_lever_s_reason(
    tenants: Tenants, staff: APIClient, client_for: Client, chart_a: Chart
) -> None:
    staff.patch("/api/v1/orgs/acme/", {"max_concurrency": 1, "reason": "internal: cost overrun"}, format="json")
    staff.post(f"/api/v1/charts/{chart_a.pk}/pause/", {"reason": "internal: noisy tenant"}, format="json")
    member = client_for(tenants.member_a)

    assert member.get("/api/v1/orgs/acme/history/").status_code == 403
    assert member.get("/api/v1/scheduler/config/history/").status_code == 403
    events = member.get(f"/api/v1/charts/{chart_a.pk}/events/")
    assert events.status_code == 200
    assert [(e["to_state"], e["actor"], e["reason"]) for e in events.json()["results"]][-1] == ("paused", "staff", "")
    for answer in (events, member.get("/api/v1/orgs/acme/"), member.get(f"/api/v1/charts/{chart_a.pk}/")):
        assert "internal" not in answer.content.decode()
    # Staff see the reasons whole.
    assert chart_history(staff, chart_a)[-1]["reason"] == "internal: noisy tenant"


def test_a_member_s_own_reason_stays_visible_to_the_org(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    member = client_for(tenants.member_a)

    assert (
        member.post(f"/api/v1/charts/{chart_a.pk}/pause/", {"reason": "waiting for data"}, format="json").status_code
        == 200
    )

    assert chart_history(member, chart_a)[-1]["reason"] == "waiting for data"
    assert Chart.objects.get(pk=chart_a.pk).state == ChartState.PAUSED


def test_another_org_s_history_is_404_for_nobody_but_staff(tenants: Tenants, staff: APIClient) -> None:
    assert staff.get("/api/v1/orgs/nope/history/").status_code == 404
    assert staff.get("/api/v1/orgs/beta/history/").json()["results"] == []


def test_a_cost_removed_takes_its_reason_in_the_query_too(tenants: Tenants, staff: APIClient) -> None:
    """Some clients and proxies drop a DELETE's body: `?reason=` says the same."""
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=3)

    deleted = staff.delete("/api/v1/orgs/acme/costs/render/?reason=back%20to%20default")

    assert deleted.status_code == 204, deleted.content
    assert org_history(staff)[0]["reason"] == "back to default"


@pytest.mark.parametrize(
    ("query", "body", "field"),
    [
        ("?reason=a", {"reason": "b"}, "reason"),
        ("?colour=red", None, "colour"),
        ("?reason=a&reason=b", None, "reason"),
        ("?reason=%01", None, "reason"),
    ],
)
def test_a_cost_removal_s_bad_query_is_a_400_naming_it(
    tenants: Tenants, staff: APIClient, query: str, body: Any, field: str
) -> None:
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=3)

    response = staff.delete(f"/api/v1/orgs/acme/costs/render/{query}", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert WorkflowCost.objects.filter(org=tenants.org_a).exists()
    assert not OrgChange.objects.filter(org=tenants.org_a).exists()
