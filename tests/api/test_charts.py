"""Chart endpoints across the three tenants: nothing of one org reaches another, on any route."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, ChartEvent, ChartState
from orgs.models import Membership
from tests.conftest import Tenants
from tests.factories import ChartFactory, MembershipFactory, OrgFactory

Client = Callable[[Any], APIClient]
ACTIONS = ["pause", "resume", "prioritize", "move-to-top", "cancel"]


def test_submit_is_idempotent(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)
    body = {"workflow": "render", "external_id": "job-1", "payload": {"size": 3}}

    first = client.post("/api/v1/charts/", body, format="json")
    repeat = client.post("/api/v1/charts/", body, format="json")

    assert first.status_code == 201, first.json()
    assert repeat.status_code == 200
    assert first.json()["id"] == repeat.json()["id"]
    assert first.json()["org"] == "acme"
    assert first.json()["state"] == "queued"
    assert Chart.objects.filter(org=tenants.org_a, external_id="job-1").count() == 1


def test_submit_records_the_actor(tenants: Tenants, client_for: Client) -> None:
    client_for(tenants.member_a).post("/api/v1/charts/", {"workflow": "render", "external_id": "j"}, format="json")

    assert ChartEvent.objects.get().actor == "user:alice"


@pytest.mark.parametrize("slug", ["beta", "no-such-org"])
def test_submit_to_another_org_is_the_same_400_as_to_none(tenants: Tenants, client_for: Client, slug: str) -> None:
    response = client_for(tenants.member_a).post(
        "/api/v1/charts/", {"org": slug, "workflow": "render", "external_id": "x"}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"org": [f"unknown org '{slug}'"]}
    assert not Chart.objects.exists()


def test_outsider_cannot_submit_or_read(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(tenants.outsider)

    submit = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "x"}, format="json")
    listing = client.get("/api/v1/charts/")

    assert submit.status_code == 400
    assert "org" in submit.json()
    assert listing.json()["results"] == []
    assert client.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 404


def test_member_of_several_orgs_must_name_one(tenants: Tenants, client_for: Client) -> None:
    MembershipFactory(user=tenants.member_a, org=tenants.org_b)
    client = client_for(tenants.member_a)

    unnamed = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "x"}, format="json")
    named = client.post("/api/v1/charts/", {"org": "beta", "workflow": "render", "external_id": "x"}, format="json")

    assert unnamed.status_code == 400
    assert "org" in unnamed.json()
    assert named.status_code == 201
    assert named.json()["org"] == "beta"


def test_anonymous_gets_401(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(None)

    assert client.get("/api/v1/charts/").status_code == 401
    assert client.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 401
    assert client.post("/api/v1/charts/", {}, format="json").status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"external_id": "x"}, "workflow"),
        ({"workflow": "render"}, "external_id"),
        ({"workflow": "nope", "external_id": "x"}, "workflow"),
        ({"workflow": "render", "external_id": ""}, "external_id"),
        ({"workflow": "render", "external_id": "x" * 201}, "external_id"),
        ({"workflow": "render", "external_id": "x", "priority": 5000}, "priority"),
        ({"workflow": "render", "external_id": "x", "payload": [1]}, "payload"),
        ({"workflow": "render", "external_id": "x", "payload": {"a": "\x00"}}, "payload"),
        ({"workflow": "render", "external_id": "x", "high_priority": "maybe"}, "high_priority"),
    ],
)
def test_bad_input_is_400_naming_the_field(
    tenants: Tenants, client_for: Client, body: dict[str, Any], field: str
) -> None:
    response = client_for(tenants.member_a).post("/api/v1/charts/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not Chart.objects.exists()


def test_single_submit_reports_every_error_at_once(tenants: Tenants, client_for: Client) -> None:
    body = {"workflow": "nope", "external_id": "", "priority": "abc", "payload": [1], "colour": "red"}

    response = client_for(tenants.member_a).post("/api/v1/charts/", body, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"workflow", "external_id", "priority", "payload", "colour"}
    assert response.json()["workflow"] == ["unknown workflow 'nope'"]
    assert response.json()["colour"] == ["unknown field"]
    assert not Chart.objects.exists()


def test_single_submit_lists_a_refused_lever_with_the_other_errors(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)
    levers = {"workflow": "render", "external_id": "x", "high_priority": True, "priority": 11}

    with_others = client.post("/api/v1/charts/", {**levers, "workflow": "nope"}, format="json")
    alone = client.post("/api/v1/charts/", levers, format="json")

    assert with_others.status_code == 400
    assert set(with_others.json()) == {"workflow", "high_priority", "priority"}
    assert alone.status_code == 403
    assert set(alone.json()) == {"high_priority", "priority"}
    assert not Chart.objects.exists()


def test_single_submit_to_an_unknown_org_hears_of_its_other_errors(tenants: Tenants, client_for: Client) -> None:
    body = {"org": "beta", "workflow": "nope", "external_id": "x", "priority": 5000}

    response = client_for(tenants.member_a).post("/api/v1/charts/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "org": ["unknown org 'beta'"],
        "workflow": ["unknown workflow 'nope'"],
        "priority": response.json()["priority"],
    }
    assert not Chart.objects.exists()


@pytest.mark.parametrize("body", [[{"workflow": "render", "external_id": "x"}], "text", 5])
def test_single_submit_of_something_not_an_object_is_400(tenants: Tenants, client_for: Client, body: Any) -> None:
    response = client_for(tenants.member_a).post("/api/v1/charts/", body, format="json")

    assert response.status_code == 400
    assert "detail" in response.json()


def test_not_json_is_400(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.member_a).post("/api/v1/charts/", "{not json", content_type="application/json")

    assert response.status_code == 400


def test_reusing_an_external_id_with_another_workflow_is_409(tenants: Tenants, client_for: Client) -> None:
    from tests.factories import WorkflowFactory

    WorkflowFactory(name="other")
    client = client_for(tenants.member_a)
    client.post("/api/v1/charts/", {"workflow": "render", "external_id": "x"}, format="json")

    response = client.post("/api/v1/charts/", {"workflow": "other", "external_id": "x"}, format="json")

    assert response.status_code == 409
    assert "external_id" in response.json()


def test_queue_limit_gives_429_with_retry_after(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.queue_limit = 1
    tenants.org_a.save()
    client = client_for(tenants.member_a)
    client.post("/api/v1/charts/", {"workflow": "render", "external_id": "1"}, format="json")

    refused = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "2"}, format="json")
    repeat = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "1"}, format="json")

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "org" in refused.json()
    assert repeat.status_code == 200  # a repeat is admitted: it adds nothing
    assert Chart.objects.count() == 1


def test_oversized_body_is_413(tenants: Tenants, client_for: Client, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = {"workflow": "render", "external_id": "x", "payload": {"blob": "x" * 2000}}

    response = client_for(tenants.member_a).post("/api/v1/charts/", body, format="json")

    assert response.status_code == 413
    assert not Chart.objects.exists()


def test_list_shows_only_the_callers_orgs(tenants: Tenants, client_for: Client, chart_a: Chart, chart_b: Chart) -> None:
    def ids(user: Any, query: str = "") -> set[int]:
        response = client_for(user).get(f"/api/v1/charts/{query}")
        assert response.status_code == 200
        return {row["id"] for row in response.json()["results"]}

    assert ids(tenants.member_a) == {chart_a.pk}
    assert ids(tenants.member_b) == {chart_b.pk}
    assert ids(tenants.outsider) == set()
    assert ids(tenants.staff) == {chart_a.pk, chart_b.pk}
    # Filters never widen the scope.
    assert ids(tenants.member_a, "?org=beta") == set()
    assert ids(tenants.member_a, f"?external_id={chart_b.external_id}") == set()
    assert ids(tenants.staff, "?org=beta") == {chart_b.pk}


def test_list_filters(tenants: Tenants, client_for: Client) -> None:
    from tests.factories import WorkflowFactory

    other = WorkflowFactory(name="other")
    queued = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="q")
    paused = ChartFactory(org=tenants.org_a, workflow=other, external_id="p", state=ChartState.PAUSED)
    client = client_for(tenants.member_a)

    def ids(query: str) -> set[int]:
        return {row["id"] for row in client.get(f"/api/v1/charts/?{query}").json()["results"]}

    assert ids("state=paused") == {paused.pk}
    assert ids("workflow=render") == {queued.pk}
    assert ids("external_id=q") == {queued.pk}
    assert client.get("/api/v1/charts/?state=bogus").status_code == 400
    assert "state" in client.get("/api/v1/charts/?state=bogus").json()


def test_list_refuses_unknown_and_repeated_parameters(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)

    unknown = client.get("/api/v1/charts/?colour=red&state=queued")
    repeated = client.get("/api/v1/charts/?org=acme&org=beta")
    repeated_state = client.get("/api/v1/charts/?state=queued&state=running")

    assert (unknown.status_code, unknown.json()) == (400, {"colour": ["unknown query parameter"]})
    assert repeated.status_code == 400
    assert "once" in repeated.json()["org"][0]
    assert repeated_state.status_code == 400
    assert "state=queued,running" in repeated_state.json()["state"][0]
    assert client.get("/api/v1/charts/?page_size=2&cursor=").status_code == 200


def test_list_takes_several_states_with_commas(tenants: Tenants, client_for: Client) -> None:
    queued = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="q")
    paused = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="p", state=ChartState.PAUSED)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="c", state=ChartState.CANCELLED)
    client = client_for(tenants.member_a)

    response = client.get("/api/v1/charts/?state=queued,paused")
    bad = client.get("/api/v1/charts/?state=queued,bogus")

    assert {row["id"] for row in response.json()["results"]} == {queued.pk, paused.pk}
    assert bad.status_code == 400
    assert "bogus" in bad.json()["state"][0]


def test_list_filters_by_when_created_and_updated(tenants: Tenants, client_for: Client) -> None:
    now = timezone.now()
    old = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="old")
    new = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="new")
    Chart.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=2), updated_at=now - timedelta(days=2))
    client = client_for(tenants.member_a)

    def ids(query: str) -> set[int]:
        response = client.get(f"/api/v1/charts/?{query}")
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    day_ago = (now - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert ids(f"created_after={day_ago}") == {new.pk}
    assert ids(f"created_before={day_ago}") == {old.pk}
    assert ids(f"updated_after={day_ago}") == {new.pk}
    client.post(f"/api/v1/charts/{old.pk}/pause/", {}, format="json")
    assert ids(f"updated_after={day_ago}") == {new.pk, old.pk}
    for name in ("created_after", "created_before", "updated_after"):
        bad = client.get(f"/api/v1/charts/?{name}=yesterday")
        assert bad.status_code == 400
        assert list(bad.json()) == [name]


def test_chart_events_and_orgs_refuse_unknown_parameters(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(tenants.member_a)

    events = client.get(f"/api/v1/charts/{chart_a.pk}/events/?colour=red")
    orgs = client.get("/api/v1/orgs/?colour=red")

    assert (events.status_code, events.json()) == (400, {"colour": ["unknown query parameter"]})
    assert (orgs.status_code, orgs.json()) == (400, {"colour": ["unknown query parameter"]})
    assert client.get(f"/api/v1/charts/{chart_a.pk}/events/?page_size=5").status_code == 200
    repeated_page = client.get("/api/v1/orgs/?page_size=1&page_size=2")
    assert (repeated_page.status_code, list(repeated_page.json())) == (400, ["page_size"])


def test_move_to_top_takes_a_reason_and_nothing_else(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(tenants.member_a)
    url = f"/api/v1/charts/{chart_a.pk}/move-to-top/"

    bogus = client.post(url, {"bogus": 1}, format="json")
    moved = client.post(url, {"reason": "the customer is waiting"}, format="json")

    assert (bogus.status_code, bogus.json()) == (400, {"bogus": ["unknown field"]})
    assert moved.status_code == 200
    assert "the customer is waiting" in ChartEvent.objects.filter(chart=chart_a).latest("id").reason


def test_list_paginates_with_a_cursor(tenants: Tenants, client_for: Client) -> None:
    for i in range(5):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id=f"c{i}")
    client = client_for(tenants.member_a)

    first = client.get("/api/v1/charts/?page_size=2").json()
    second = client.get(first["next"]).json()

    assert len(first["results"]) == 2
    assert len(second["results"]) == 2
    assert not {r["id"] for r in first["results"]} & {r["id"] for r in second["results"]}


def test_list_query_count_does_not_grow(
    tenants: Tenants, client_for: Client, django_assert_max_num_queries: Any
) -> None:
    client = client_for(tenants.member_a)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    with django_assert_max_num_queries(5):
        client.get("/api/v1/charts/")
    for _ in range(30):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    with django_assert_max_num_queries(5):
        assert len(client.get("/api/v1/charts/").json()["results"]) == 31


def test_token_list_query_count(
    tenants: Tenants, token_client: Any, org_token: str, django_assert_max_num_queries: Any
) -> None:
    for _ in range(20):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    client = token_client(org_token)
    client.get("/api/v1/charts/")  # the first use records last_used_at
    with django_assert_max_num_queries(2):  # the token with its scope, then the page
        assert len(client.get("/api/v1/charts/").json()["results"]) == 20


def test_status_read_is_one_query_and_scoped(
    tenants: Tenants,
    token_client: Any,
    org_token: str,
    chart_a: Chart,
    chart_b: Chart,
    django_assert_num_queries: Any,
) -> None:
    """The token with its user and role, and the chart with its org, workflow and plan: one query (the
    API's most frequent call, `charts/status_api.py`); another org's chart is a 404 in as many."""
    client = token_client(org_token)
    client.get(f"/api/v1/charts/{chart_a.pk}/")  # the first use records last_used_at
    with django_assert_num_queries(1):
        body = client.get(f"/api/v1/charts/{chart_a.pk}/").json()
    assert (body["id"], body["org"], body["workflow"], body["position"]) == (chart_a.pk, "acme", "render", 0)
    with django_assert_num_queries(1):
        assert client.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 404
    assert client.get(f"/api/v1/charts/{2**63}/").status_code == 404


def test_retrieve_shows_the_plan_and_a_safe_error(tenants: Tenants, client_for: Client) -> None:
    now = timezone.now()
    chart = ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        state=ChartState.RETRY_WAIT,
        attempt=2,
        position=4,
        predicted_start=now + timedelta(minutes=1),
        eta=now + timedelta(minutes=2),
        eta_low=now + timedelta(minutes=1, seconds=30),
        eta_high=now + timedelta(minutes=3),
        last_error=(
            'Traceback (most recent call last):\n  File "/srv/secret/worker.py", line 3\n'
            "TimeoutError: render took too long"
        ),
    )

    body = client_for(tenants.member_a).get(f"/api/v1/charts/{chart.pk}/").json()

    assert body["position"] == 4
    assert body["attempt"] == 2
    assert body["predicted_start"]
    assert body["eta"]
    assert body["eta_low"]
    assert body["eta_high"]
    assert body["last_error"] == "TimeoutError: render took too long"
    assert "secret" not in str(body)


@pytest.mark.parametrize("who", ["member_b", "outsider"])
def test_another_orgs_chart_is_404_on_every_route(
    tenants: Tenants, client_for: Client, chart_a: Chart, who: str
) -> None:
    client = client_for(getattr(tenants, who))

    assert client.get(f"/api/v1/charts/{chart_a.pk}/").status_code == 404
    for name in ACTIONS:
        response = client.post(f"/api/v1/charts/{chart_a.pk}/{name}/", {"priority": 5}, format="json")
        assert response.status_code == 404, name
    chart_a.refresh_from_db()
    assert chart_a.state == ChartState.QUEUED
    assert chart_a.priority == 0
    assert not ChartEvent.objects.exists()


def test_missing_chart_is_the_same_404(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(tenants.member_b)

    foreign = client.get(f"/api/v1/charts/{chart_a.pk}/")
    missing = client.get("/api/v1/charts/999999/")

    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()


def test_actions_on_own_chart(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(tenants.member_a)
    url = f"/api/v1/charts/{chart_a.pk}"

    assert client.post(f"{url}/pause/", {"reason": "later"}, format="json").json()["state"] == "paused"
    assert client.post(f"{url}/resume/").json()["state"] == "queued"
    prioritized = client.post(f"{url}/prioritize/", {"priority": 7}, format="json").json()
    assert (prioritized["priority"], prioritized["high_priority"]) == (7, False)
    assert client.post(f"{url}/move-to-top/").json()["priority"] >= 7
    assert client.post(f"{url}/cancel/").json()["state"] == "cancelled"
    # A finished chart cannot be paused: 409 naming the state.
    refused = client.post(f"{url}/pause/")
    assert refused.status_code == 409
    assert "state" in refused.json()
    actors = set(ChartEvent.objects.filter(chart=chart_a).values_list("actor", flat=True))
    assert actors == {"user:alice"}


def test_prioritize_needs_a_lever(tenants: Tenants, client_for: Client, chart_a: Chart) -> None:
    client = client_for(tenants.member_a)

    assert client.post(f"/api/v1/charts/{chart_a.pk}/prioritize/", {}, format="json").status_code == 400
    response = client.post(f"/api/v1/charts/{chart_a.pk}/prioritize/", {"priority": "high"}, format="json")
    assert response.status_code == 400
    assert "priority" in response.json()


def test_staff_acts_on_any_org(tenants: Tenants, client_for: Client, chart_b: Chart) -> None:
    client = client_for(tenants.staff)

    assert client.get(f"/api/v1/charts/{chart_b.pk}/").status_code == 200
    assert client.post(f"/api/v1/charts/{chart_b.pk}/pause/").json()["state"] == "paused"
    unnamed = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "s"}, format="json")
    assert unnamed.status_code == 400
    assert "org" in unnamed.json()
    named = client.post("/api/v1/charts/", {"org": "beta", "workflow": "render", "external_id": "s"}, format="json")
    assert named.status_code == 201


def test_viewer_reads_but_does_not_write(tenants: Tenants, client_for: Client) -> None:
    viewer_org = OrgFactory(slug="gamma")
    MembershipFactory(user=tenants.outsider, org=viewer_org, role=Membership.Role.VIEWER)
    chart = ChartFactory(org=viewer_org, workflow=tenants.workflow)
    client = client_for(tenants.outsider)

    assert client.get(f"/api/v1/charts/{chart.pk}/").status_code == 200
    assert client.post(f"/api/v1/charts/{chart.pk}/cancel/").status_code == 403
    assert client.post("/api/v1/charts/", {"workflow": "render", "external_id": "v"}, format="json").status_code == 403
    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED


def test_session_writes_need_the_csrf_token(tenants: Tenants) -> None:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(tenants.member_a)

    response = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "x"}, format="json")

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not Chart.objects.exists()


def test_single_submit_statements_are_pinned(
    tenants: Tenants, token_client: Any, org_token: str, django_assert_num_queries: Any
) -> None:
    """A new chart: the token; the org, then the workflow (validation); then under the org's lock
    (a savepoint here, a transaction in production) the promise its workflow is held to in the org
    (its due time, when the item gives none), the insert with its event, which the org's unique
    index skips for a repeat; a repeat then reads the existing chart, and the answer reads it with its
    plan. No temporary table for one chart. With its own due time, no promise is read, but the learned
    duration its due time is judged against (the warning)."""
    client = token_client(org_token)
    client.get("/api/v1/charts/")  # the first use records last_used_at
    body = {"workflow": "render", "external_id": "pinned"}
    with django_assert_num_queries(8) as captured:
        assert client.post("/api/v1/charts/", body, format="json").status_code == 201
    statements = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    assert statements == ["SELECT", "SELECT", "SELECT", "SAVEPOINT", "SELECT", "SELECT", "WITH", "RELEASE"]
    with django_assert_num_queries(10) as captured:
        assert client.post("/api/v1/charts/", body, format="json").status_code == 200
    statements = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    assert statements == [
        "SELECT", "SELECT", "SELECT", "SAVEPOINT", "SELECT", "SELECT", "WITH", "SELECT", "RELEASE", "SELECT",
    ]  # fmt: skip
    dated = {"workflow": "render", "external_id": "dated", "due_at": "2099-01-01T00:00:00Z"}
    with django_assert_num_queries(8):
        assert client.post("/api/v1/charts/", dated, format="json").status_code == 201


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("external_id=", "external_id"),
        ("workflow=", "workflow"),
        ("page_size=", "page_size"),
        ("page_size=0", "page_size"),
        ("state=queued,,running", "state"),
        ("state=queued,%09running", "state"),
    ],
)
def test_an_empty_or_malformed_filter_is_a_400_naming_it(
    tenants: Tenants, client_for: Client, query: str, field: str
) -> None:
    """Found by Schemathesis's negative data: an empty `page_size` was read as absent."""
    response = client_for(tenants.member_a).get(f"/api/v1/charts/?{query}")

    assert response.status_code == 400
    assert set(response.json()) == {field}


@pytest.mark.parametrize("body", ["null", "[]", '"stop"', "5"])
def test_a_lever_s_body_that_is_not_an_object_is_a_400(
    tenants: Tenants, client_for: Client, chart_a: Chart, body: str
) -> None:
    """Found by Schemathesis's negative data: `null` (or a list) was read as no reason and the lever pulled."""
    response = client_for(tenants.member_a).post(
        f"/api/v1/charts/{chart_a.pk}/pause/", body, content_type="application/json"
    )
    held = client_for(tenants.staff).post("/api/v1/orgs/acme/hold/", body, content_type="application/json")

    assert (response.status_code, held.status_code) == (400, 400)
    assert "detail" in response.json()
    chart_a.refresh_from_db()
    tenants.org_a.refresh_from_db()
    assert (chart_a.state, tenants.org_a.is_held) == (ChartState.QUEUED, False)
