"""Hostile and careless input, class by class: each gets a clear 4xx naming the problem, never a 500.

The classes came from an attacker's probe of the whole site (API, dashboard, portal, admin, WebSockets);
each parameter below is one instance of a class. Chunked bodies and the WebSocket handshake on the real
ASGI server are in `tests/test_hostile_live.py`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from rest_framework.test import APIClient

from charts.models import Chart, ChartEvent
from common import events
from orgs.access import api_token_issue
from orgs.models import Org, ProviderPause
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory


@pytest.fixture(autouse=True)
def quiet_announcements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "request_replan", lambda: None)
    monkeypatch.setattr(events, "broadcast", lambda group, message: None)


@pytest.fixture
def staff_api(tenants: Tenants) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.staff, staff=True)}")  # type: ignore[arg-type]
    return client


@pytest.fixture
def org_api(tenants: Tenants) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.member_a, org=tenants.org_a)}")  # type: ignore[arg-type]
    return client


@pytest.fixture
def staff_browser(tenants: Tenants) -> Client:
    client = Client()
    client.force_login(tenants.staff)
    return client


def cursor(position: str) -> str:
    """A cursor as DRF encodes them, with a forged position."""
    return base64.b64encode(urlencode({"p": position}).encode()).decode()


def nested(depth: int) -> Any:
    value: Any = {"leaf": 1}
    for _ in range(depth):
        value = {"a": value}
    return value


def post_raw(client: Client, url: str, body: str | bytes) -> Any:
    return client.post(url, data=body, content_type="application/json")


# Forged pagination cursors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "position"),
    [
        ("/api/v1/charts/", "abc"),
        ("/api/v1/charts/", "1.5"),
        ("/api/v1/charts/", "99999999999999999999999"),
        ("/api/v1/charts/", "-1"),
        ("/api/v1/charts/", "1\x00"),
        ("/api/v1/provider-pauses/", "abc"),
        ("/api/v1/provider-pauses/", "99999999999999999999999"),
        ("/api/v1/orgs/", "a\x00b"),
    ],
)
def test_a_forged_cursor_is_404(tenants: Tenants, staff_api: APIClient, url: str, position: str) -> None:
    ChartFactory.create_batch(2, org=tenants.org_a, workflow=tenants.workflow)

    response = staff_api.get(url, {"cursor": cursor(position)})

    assert response.status_code == 404
    assert "cursor" in str(response.json()).lower()


@pytest.mark.parametrize("page_size", ["abc", "0", "-5", "1.5", "\u0661"])
@pytest.mark.parametrize("url", ["/api/v1/charts/", "/api/v1/orgs/", "/api/v1/provider-pauses/"])
def test_a_bad_page_size_is_400(tenants: Tenants, staff_api: APIClient, url: str, page_size: str) -> None:
    response = staff_api.get(url, {"page_size": page_size})

    assert response.status_code == 400
    assert "page_size" in response.json()


def test_a_genuine_cursor_still_pages(tenants: Tenants, staff_api: APIClient) -> None:
    ChartFactory.create_batch(3, org=tenants.org_a, workflow=tenants.workflow)

    first = staff_api.get("/api/v1/charts/", {"page_size": 2}).json()
    second = staff_api.get(first["next"])

    assert second.status_code == 200
    assert len(second.json()["results"]) == 1


# Deep nesting, lone surrogates, NUL and duplicate keys in JSON bodies -----------------------------


@pytest.mark.parametrize("depth", [40, 300, 5000, 100_000])
def test_deeply_nested_json_is_400(tenants: Tenants, org_api: APIClient, depth: int) -> None:
    body = '{"workflow": "render", "external_id": "deep", "payload": ' + '{"a":' * depth + "1" + "}" * depth + "}"

    response = post_raw(org_api, "/api/v1/charts/", body)

    assert response.status_code == 400
    assert "nested" in str(response.json())
    assert not Chart.objects.exists()


def test_nesting_within_the_limit_is_accepted(tenants: Tenants, org_api: APIClient) -> None:
    body = {"workflow": "render", "external_id": "ok", "payload": nested(20)}

    assert org_api.post("/api/v1/charts/", body, format="json").status_code == 201


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/charts/", r'{"workflow": "render", "external_id": "s", "payload": {"a": "\ud800"}}', "payload"),
        ("/api/v1/charts/", r'{"workflow": "render", "external_id": "s", "payload": {"\udfff": 1}}', "payload"),
        ("/api/v1/charts/", r'{"workflow": "render", "external_id": "s", "payload": {"a": ["x\udc00y"]}}', "payload"),
        ("/api/v1/charts/bulk/", r'{"items": [{"workflow": "render", "external_id": "\ud800"}]}', "items"),
        (
            "/api/v1/charts/bulk/",
            r'{"items": [{"workflow": "render", "external_id": "b", "payload": {"a": "\ud800"}}]}',
            "items",
        ),
        ("/api/v1/charts/{chart}/pause/", r'{"reason": "\ud800"}', "reason"),
    ],
)
def test_a_lone_surrogate_is_400_naming_the_field(
    tenants: Tenants, org_api: APIClient, url: str, body: str, field: str
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)

    response = post_raw(org_api, url.format(chart=chart.pk), body)

    assert response.status_code == 400
    assert field in response.json()
    assert Chart.objects.count() == 1
    assert ChartEvent.objects.filter(chart=chart).count() == 0


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/charts/", '{"workflow": "render", "external_id": "a", "external_id": "b"}', "external_id"),
        ("/api/v1/charts/", '{"workflow": "render", "external_id": "a", "payload": {"k": 1, "k": 2}}', "payload"),
        ("/api/v1/charts/bulk/", '{"items": [], "items": [{"workflow": "render", "external_id": "a"}]}', "items"),
    ],
)
def test_a_duplicate_key_is_400(tenants: Tenants, org_api: APIClient, url: str, body: str, field: str) -> None:
    response = post_raw(org_api, url, body)

    assert response.status_code == 400
    assert field in response.json()
    assert "duplicate" in str(response.json())
    assert not Chart.objects.exists()


# Strict, predictable input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workflow": "render", "external_id": 12345}, "external_id"),
        ({"workflow": "render", "external_id": 1.5}, "external_id"),
        ({"workflow": "render", "external_id": True}, "external_id"),
        ({"workflow": 7, "external_id": "a"}, "workflow"),
        ({"workflow": "render", "external_id": "a\x01b"}, "external_id"),
        ({"workflow": "render", "external_id": "a\nb"}, "external_id"),
        ({"workflow": "render", "external_id": "a\x7fb"}, "external_id"),
        ({"workflow": "render", "external_id": "a\u200bb\u202e"}, "external_id"),
        ({"workflow": "render", "external_id": "a", "colour": "red"}, "colour"),
        ({"workflow": "render", "external_id": "a", "priority": "5"}, "priority"),
        ({"workflow": "render", "external_id": "a", "priority": 5.0}, "priority"),
        ({"workflow": "render", "external_id": "a", "high_priority": "yes"}, "high_priority"),
        ({"workflow": "render", "external_id": "a", "high_priority": 1}, "high_priority"),
        ({"workflow": "render", "external_id": "a", "payload": []}, "payload"),
        ({"workflow": "render", "external_id": "a", "payload": "{}"}, "payload"),
        ({"workflow": "render\x00", "external_id": "a"}, "workflow"),
    ],
)
def test_single_submit_is_strict(tenants: Tenants, org_api: APIClient, body: dict[str, Any], field: str) -> None:
    response = org_api.post("/api/v1/charts/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not Chart.objects.exists()


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"workflow": "render", "external_id": 12345}, "external_id"),
        ({"workflow": "render", "external_id": "a\tb"}, "external_id"),
        ({"workflow": "render", "external_id": "a", "priority": "5"}, "priority"),
        ({"workflow": "render", "external_id": "a", "colour": "red"}, "colour"),
    ],
)
def test_bulk_submit_is_as_strict(tenants: Tenants, org_api: APIClient, item: dict[str, Any], field: str) -> None:
    response = org_api.post("/api/v1/charts/bulk/", {"items": [item]}, format="json")

    assert response.status_code == 400
    assert field in response.json()["items"]["0"]
    assert not Chart.objects.exists()


@pytest.mark.parametrize(
    ("method", "url", "body", "field"),
    [
        ("post", "/api/v1/charts/{chart}/pause/", {"reason": "x", "why": "y"}, "why"),
        ("post", "/api/v1/charts/{chart}/pause/", {"reason": 5}, "reason"),
        ("post", "/api/v1/charts/{chart}/prioritize/", {"priority": 1, "urgent": True}, "urgent"),
        ("post", "/api/v1/charts/{chart}/prioritize/", {"priority": "3"}, "priority"),
        ("post", "/api/v1/charts/{chart}/prioritize/", {"high_priority": "true"}, "high_priority"),
        ("patch", "/api/v1/orgs/acme/", {"weight": 2, "wieght": 3}, "wieght"),
        ("patch", "/api/v1/orgs/acme/", {"max_concurrency": 10**12}, "max_concurrency"),
        ("patch", "/api/v1/orgs/acme/", {"queue_limit": 10**12}, "queue_limit"),
        ("patch", "/api/v1/orgs/acme/", {"weight": "2"}, "weight"),
        ("patch", "/api/v1/scheduler/config/", {"budget": 5, "budjet": 6}, "budjet"),
        ("patch", "/api/v1/scheduler/config/", {"quantum": "1"}, "quantum"),
        ("put", "/api/v1/orgs/acme/costs/render/", {"cost": 2, "price": 1}, "price"),
        ("put", "/api/v1/orgs/acme/costs/render/", {"cost": "2"}, "cost"),
        ("post", "/api/v1/provider-pauses/", {"provider": "llm", "until": "2030-01-01T00:00:00Z", "x": 1}, "x"),
        ("post", "/api/v1/scheduler/plan-preview/", {"weights": {"acme": 2}, "budgt": 3}, "budgt"),
        ("post", "/api/v1/scheduler/plan-preview/", {"weights": ["acme"]}, "weights"),
        (
            "post",
            "/api/v1/scheduler/plan-preview/",
            {"costs": [{"org": "acme", "workflow": "render", "cost": "1"}]},
            "costs",
        ),
    ],
)
def test_every_api_body_is_strict(
    tenants: Tenants, staff_api: APIClient, method: str, url: str, body: dict[str, Any], field: str
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    ProviderFactory(slug="llm")

    response = getattr(staff_api, method)(url.format(chart=chart.pk), body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()
    assert Org.objects.get(slug="acme").weight == 2


# The dashboard's endpoints -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "org=%00",
        "org=a%00b",
        "start=%00",
        "parts=%00",
        "limit=99999999999999999999999",
        "start=99999999999999999999999",
    ],
)
def test_dashboard_queue_and_samples_refuse_bad_queries(tenants: Tenants, staff_browser: Client, query: str) -> None:
    for path in ("/dashboard/queue/", "/dashboard/samples/"):
        response = staff_browser.get(f"{path}?{query}")
        assert response.status_code in (200, 400), (path, query, response.status_code)
        if "%00" in query:
            assert response.status_code == 400


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        # What the dashboard's levers and what-if panel send, to the API they call.
        ("post", "/api/v1/scheduler/plan-preview/", {"weights": ["beta"]}),
        ("post", "/api/v1/scheduler/plan-preview/", {"weights": "beta"}),
        ("post", "/api/v1/scheduler/plan-preview/", {"hold": "beta"}),
        ("post", "/api/v1/scheduler/plan-preview/", {"hold": [["beta"]]}),
        ("post", "/api/v1/scheduler/plan-preview/", {"release": {"beta": 1}}),
        ("post", "/api/v1/scheduler/plan-preview/", {"costs": {"org": "acme"}}),
        ("post", "/api/v1/scheduler/plan-preview/", {"costs": "x"}),
        ("post", "/api/v1/scheduler/plan-preview/", ["weights"]),
        ("post", "/api/v1/scheduler/plan-preview/", {"weights": {"acme": 10**30}}),
        ("patch", "/api/v1/orgs/acme/", {"max_concurrency": 10**12}),
        ("patch", "/api/v1/orgs/acme/", {"queue_limit": 10**12}),
        ("put", "/api/v1/orgs/acme/costs/render/", {"cost": 10**12}),
        ("put", "/api/v1/orgs/acme/costs/render/", {"cost": [1]}),
        ("put", "/api/v1/orgs/acme/costs/ren%00der/", {"cost": 1}),
        ("patch", "/api/v1/orgs/acme/", {"weight": [1]}),
        ("post", "/api/v1/orgs/acme/hold/", {"reason": "\ud800"}),
        ("post", "/api/v1/orgs/acme/hold/", {"reason": "a\x00"}),
        ("patch", "/api/v1/scheduler/config/", {"budget": {"a": 1}}),
        ("patch", "/api/v1/scheduler/config/", {"policy": 5}),
        ("patch", "/api/v1/scheduler/config/", {"policy": "deficit", "quantum": "x"}),
        ("post", "/api/v1/provider-pauses/", {"provider": "llm", "until": 5}),
        ("post", "/api/v1/provider-pauses/", {"provider": "llm", "until": "2030-01-01T00:00:00Z", "org": {"a": 1}}),
        ("post", "/api/v1/provider-pauses/", {"provider": "llm", "until": "2030-01-01T00:00:00Z", "org": "ac\x00me"}),
        ("post", "/api/v1/provider-pauses/", {"provider": "llm", "until": "2030-99-01T00:00:00Z"}),
        ("post", "/api/v1/providers/llm/resume/", {"org": ["acme"]}),
        ("post", "/api/v1/charts/{chart}/prioritize/", {"priority": "high"}),
        ("post", "/api/v1/charts/{chart}/prioritize/", {"high_priority": "yes"}),
        ("post", "/api/v1/charts/{chart}/pause/", {"reason": {"nested": True}}),
        ("post", "/api/v1/charts/99999999999999999999999/pause/", {}),
    ],
)
def test_the_dashboards_levers_refuse_bad_bodies(
    tenants: Tenants, staff_browser: Client, method: str, url: str, body: Any
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    ProviderFactory(slug="llm")

    send = getattr(staff_browser, method)
    response = send(url.format(chart=chart.pk), json.dumps(body), content_type="application/json")

    assert response.status_code in (400, 404), response.content
    assert response.json()
    assert Org.objects.get(slug="acme").weight == 2
    assert not ChartEvent.objects.filter(chart=chart).exists()
    assert not ProviderPause.objects.exists()


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000,
        b'{"budget": 5, "budget": 6}',
        b'{"reason": "' + b"\xff\xfe" + b'"}',
        ('{"changes": ' + '{"a":' * 5000 + "1" + "}" * 5000 + "}").encode(),
    ],
)
def test_the_dashboards_levers_refuse_hostile_json(tenants: Tenants, staff_browser: Client, raw: bytes) -> None:
    for method, url in [
        ("patch", "/api/v1/scheduler/config/"),
        ("post", "/api/v1/scheduler/plan-preview/"),
        ("post", "/api/v1/orgs/acme/hold/"),
    ]:
        response = getattr(staff_browser, method)(url, raw, content_type="application/json")
        assert response.status_code == 400, (url, response.content)
    assert Org.objects.get(slug="acme").weight == 2


# NUL anywhere in a URL's query, on every kind of page ----------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/charts/?external_id=a%00",
        "/api/v1/charts/?workflow=%00",
        "/api/v1/provider-pauses/?active=%00",
        "/portal/acme/?q=%00&state=%00&page=%00",
        "/portal/acme/table/?q=%00",
        "/admin/charts/chart/?q=%00",
        "/admin/orgs/org/?q=%00",
        "/admin/charts/chart/?state__exact=%00",
        "/admin/orgs/org/?o=%00",
    ],
)
def test_a_nul_in_a_query_is_a_clean_answer(tenants: Tenants, path: str) -> None:
    for user in (tenants.staff, tenants.member_a):
        client = Client()
        client.force_login(user)
        response = client.get(path)
        assert response.status_code < 500, (path, user, response.status_code)


@pytest.mark.parametrize(
    "path",
    [
        "/portal/acme%00/",
        "/api/v1/orgs/ac%00me/",
        "/api/v1/charts/1%00/",
        "/api/v1/charts/99999999999999999999999/",
        "/api/v1/charts/abc/",
        "/api/v1/provider-pauses/99999999999999999999999/end/",
        "/portal/acme/charts/99999999999999999999999/",
        "/api/v1/charts/99999999999999999999999/move-to-top/",
        "/dashboard/partials/or%00gs/",
    ],
)
def test_a_bad_path_is_a_clean_answer(tenants: Tenants, path: str) -> None:
    for user in (tenants.staff, tenants.member_a):
        client = Client()
        client.force_login(user)
        method = client.post if path.endswith(("/end/", "/move-to-top/")) else client.get
        response = method(quote(path, safe="/%"))
        assert response.status_code in (400, 403, 404), (path, response.status_code)
        if path.startswith("/api/"):
            assert response["Content-Type"] == "application/json"


def test_the_probe_bodies_never_reach_a_500(tenants: Tenants, staff_api: APIClient, org_api: APIClient) -> None:
    """A sweep of odd bodies over every write of the API, as the attacker's probe sent them."""
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    ProviderFactory(slug="llm")
    writes: list[tuple[str, str]] = [
        ("post", "/api/v1/charts/"),
        ("post", "/api/v1/charts/bulk/"),
        ("post", f"/api/v1/charts/{chart.pk}/pause/"),
        ("post", f"/api/v1/charts/{chart.pk}/prioritize/"),
        ("post", f"/api/v1/charts/{chart.pk}/cancel/"),
        ("patch", "/api/v1/orgs/acme/"),
        ("post", "/api/v1/orgs/acme/hold/"),
        ("put", "/api/v1/orgs/acme/costs/render/"),
        ("patch", "/api/v1/scheduler/config/"),
        ("post", "/api/v1/provider-pauses/"),
        ("post", "/api/v1/scheduler/plan-preview/"),
    ]
    bodies = [
        b"",
        b"null",
        b"[]",
        b"1",
        b'"x"',
        b"{",
        b"\xff",
        b'{"\\u0000": 1}',
        b'{"a": NaN}',
        b'{"payload": {"a": 1e999}, "workflow": "render", "external_id": "inf"}',
        b'{"payload": {"a": -Infinity}, "workflow": "render", "external_id": "inf"}',
        b"[" * 3000,
    ]
    sent: Callable[..., Any]
    for client in (staff_api, org_api):
        for method, url in writes:
            for body in bodies:
                sent = getattr(client, method)
                response = sent(url, body, content_type="application/json")
                assert response.status_code < 500, (method, url, body[:20], response.status_code)
