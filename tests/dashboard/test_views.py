"""The dashboard's page, its partials and its JSON: staff only, reads only (the levers are /api/v1/)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import ChartState
from common import events
from common.actors import Actor
from knobs.models import SchedulerConfig
from orgs.models import ProviderPause, WorkflowCost
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.factories import ChartFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db


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
    assert b'id="dashboard-initial"' in response.content
    assert b'name="csrf-token"' in response.content
    page = response.content.decode()
    # The tables are in the page, rendered by the partials' own templates; the header and the org table
    # come with the socket's first resync, once the queue has painted.
    assert '<ol id="events"' in page
    assert '<tbody id="org-rows"></tbody>' in page
    assert '<div id="summary" class="summary"></div>' in page
    assert 'tr data-org="acme"' not in page
    assert '<option value="beta">beta</option>' in page
    assert "django_htmx/htmx-2.min.js" in page
    assert 'data-api="PATCH /api/v1/scheduler/config/"' in page
    # One editor of an org's levers, beside the table, for whichever org is picked in it.
    assert page.count('id="org-editor"') == 1
    assert 'data-api="PATCH /api/v1/orgs/{org}/"' in page
    assert 'data-api="PUT /api/v1/orgs/{org}/costs/{workflow}/" data-null-method="DELETE"' in page
    assert '<option value="render" data-default="1">render (1)</option>' in page


PARTIALS = ["summary", "config", "orgs", "inflight", "outside", "providers", "events"]


@pytest.mark.parametrize("path", ["samples/", "queue/", *(f"partials/?names={name}" for name in PARTIALS)])
def test_the_reads_refuse_anonymous_and_non_staff(client: Client, member_client: Client, path: str) -> None:
    assert client.get(f"/dashboard/{path}").status_code == 403
    assert member_client.get(f"/dashboard/{path}").status_code == 403


def test_an_unknown_partial_is_a_400_naming_it(staff_client: Client) -> None:
    response = staff_client.get("/dashboard/partials/?names=orgs,secrets")
    assert response.status_code == 400
    assert "secrets" in response.json()["names"][0]
    assert staff_client.get("/dashboard/partials/").status_code == 400


def test_one_request_swaps_every_region_a_hint_moved(staff_client: Client, tenants: Tenants) -> None:
    html = staff_client.get("/dashboard/partials/?names=summary,orgs,events").content.decode()
    assert '<template><div id="summary" hx-swap-oob="innerHTML">' in html
    # A table's rows come in a tbody, so that they parse as rows.
    assert '<template><tbody id="org-rows" hx-swap-oob="innerHTML"><tr id="org-' in html
    assert '<template><ol id="events" hx-swap-oob="innerHTML">' in html
    assert "provider-list" not in html


def test_the_orgs_partial_shows_each_org_and_its_levers(staff_client: Client, tenants: Tenants) -> None:
    from orgs.services import org_cap_set, org_hold

    org_hold(org=tenants.org_b, actor=Actor("user:ops", staff=True))
    org_cap_set(org=tenants.org_a, max_concurrency=3, actor=Actor("user:ops", staff=True))
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=7)
    plan_queue([tenants.org_a], tenants.workflow, 3)
    response = staff_client.get("/dashboard/partials/?names=orgs")
    assert response.status_code == 200
    html = response.content.decode()
    assert (
        f'<tr id="org-{tenants.org_a.pk}" data-org="acme" data-held="0" data-weight="2" data-cap="3" data-limit=""'
        in html
    )
    assert 'data-queued="3"' in html
    # The row's levers are values the editor reads, a hold button and a button that opens the editor.
    assert '<button type="button" class="link" data-edit>acme</button>' in html
    assert '<button type="button" data-hold>Hold</button>' in html
    assert '<button type="button" class="warn" data-hold title="release restores weight 1">Release</button>' in html
    assert '<span class="tag" data-workflow="render" data-cost="7">render=7</span>' in html


def test_an_org_row_holds_no_form(staff_client: Client, tenants: Tenants) -> None:
    """The levers are edited in the page's one editor: a row is its values, under a kilobyte with its ETA band, not
    five forms with a select of every workflow (2.2 KB a row, a megabyte at 500 orgs)."""
    from orgs.services import org_cap_set, org_queue_limit_set
    from scheduling.replan import plan_refresh

    for name in ("extract", "embed", "summarize"):
        WorkflowFactory(name=name)
    org_cap_set(org=tenants.org_a, max_concurrency=3, actor=Actor("user:ops", staff=True))
    org_queue_limit_set(org=tenants.org_a, queue_limit=100, actor=Actor("user:ops", staff=True))
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=7)
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 10)
    plan_refresh()
    html = staff_client.get("/dashboard/partials/?names=orgs").content.decode()
    rows = re.findall(r"<tr .*?</tr>", html)
    assert len(rows) == 2
    assert "<form" not in html
    assert "<input" not in html
    assert "<select" not in html
    assert max(len(row) for row in rows) < 1000


def test_a_hint_about_one_org_swaps_its_row_alone(staff_client: Client, tenants: Tenants) -> None:
    html = staff_client.get(f"/dashboard/partials/?names=summary,orgs&org={tenants.org_b.pk}").content.decode()
    assert f'<template><tr id="org-{tenants.org_b.pk}" hx-swap-oob="true" data-org="beta"' in html
    assert 'data-org="acme"' not in html
    assert 'id="org-rows"' not in html
    assert '<div id="summary" hx-swap-oob="innerHTML">' in html
    assert staff_client.get("/dashboard/partials/?names=orgs&org=x").status_code == 400


def test_one_org_row_reads_that_org_alone(
    staff_client: Client, tenants: Tenants, django_assert_max_num_queries: Any
) -> None:
    """A hint about one org costs one row: its own charts' aggregate, its costs and the org (after the
    session's two), and it shows what the whole table shows for that org."""
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 40)
    WorkflowCost.objects.create(org=tenants.org_b, workflow=tenants.workflow, cost=3)
    whole = staff_client.get("/dashboard/partials/?names=orgs").content.decode()
    with django_assert_max_num_queries(5) as queries:
        one = staff_client.get(f"/dashboard/partials/?names=orgs&org={tenants.org_b.pk}").content.decode()
    aggregate = next(query["sql"] for query in queries.captured_queries if "COUNT(" in query["sql"])
    assert f'"org_id" = {tenants.org_b.pk}' in aggregate
    row = one[one.index("<tr ") : one.index("</tr>") + 5].replace(' hx-swap-oob="true"', "")
    assert row in whole
    assert 'data-queued="20"' in row
    assert '<span class="tag" data-workflow="render" data-cost="3">render=3</span>' in row


def test_the_chart_partials_show_their_charts(staff_client: Client, tenants: Tenants) -> None:
    running = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING)
    running.started_at = timezone.now()
    running.save()
    paused = ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.PAUSED)
    inflight = staff_client.get("/dashboard/partials/?names=inflight").content.decode()
    # A row names its chart as it is shown (the cancel lever's confirmation reads them).
    assert f'<tr data-chart="{running.pk}" data-external="{running.external_id}" data-org="acme">' in inflight
    assert 'data-act="cancel"' in inflight
    outside = staff_client.get("/dashboard/partials/?names=outside").content.decode()
    assert f'<tr data-chart="{paused.pk}" data-external="{paused.external_id}" data-org="beta">' in outside
    assert 'data-act="resume"' in outside


def test_the_providers_partial_offers_resume_by_slug(staff_client: Client, tenants: Tenants) -> None:
    llm = ProviderFactory(slug="llm", name="LLM")
    until = timezone.now() + timedelta(minutes=5)
    ProviderPause.objects.create(provider=llm, org=tenants.org_a, until=until, reason="429s", created_by="user:ops")
    html = staff_client.get("/dashboard/partials/?names=providers").content.decode()
    assert 'data-api="POST /api/v1/providers/llm/resume/" data-body=\'{"org": "acme"}\'' in html
    assert "429s" in html


def test_the_summary_config_and_events_partials(staff_client: Client, tenants: Tenants) -> None:
    from knobs.services import budget_set

    budget_set(budget=7, actor=Actor("user:ops", staff=True))
    summary = staff_client.get("/dashboard/partials/?names=summary").content.decode()
    assert '<b id="budget-total">7</b>' in summary
    config = staff_client.get("/dashboard/partials/?names=config").content.decode()
    assert 'data-api="PATCH /api/v1/scheduler/config/"' in config
    assert 'name="budget" data-type="number" value="7"' in config
    events_html = staff_client.get("/dashboard/partials/?names=events").content.decode()
    assert "budget: " in events_html
    assert "user:ops" in events_html


def test_samples_returns_the_queue_history(staff_client: Client, tenants: Tenants) -> None:
    from scheduling.models import QueueSample

    QueueSample.objects.create(at=timezone.now(), queued=4, running=1, budget=10, cost_in_use=1)
    samples = staff_client.get("/dashboard/samples/").json()["samples"]
    assert [(sample["queued"], sample["running"]) for sample in samples] == [(4, 1)]


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


def test_the_page_and_its_refetch_run_a_fixed_number_of_queries(
    staff_client: Client, tenants: Tenants, django_assert_max_num_queries: Any
) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 300)
    SchedulerConfig.load()
    with django_assert_max_num_queries(23):
        assert staff_client.get("/dashboard/").status_code == 200
    # The summary: one of its queries is the last hour's ETA accuracy (`selectors.eta_accuracy`).
    for name, most in [("summary", 6), ("orgs", 8), ("outside", 5), ("inflight", 6), ("events", 5), ("providers", 5)]:
        with django_assert_max_num_queries(most):
            assert staff_client.get(f"/dashboard/partials/?names={name}").status_code == 200
    with django_assert_max_num_queries(25):
        assert staff_client.get(f"/dashboard/partials/?names={','.join(PARTIALS)}").status_code == 200
    with django_assert_max_num_queries(4):
        assert staff_client.get("/dashboard/queue/?start=120").status_code == 200


def _every_dashboard_url() -> list[tuple[str, str]]:
    from django.urls import reverse

    from scheduling.urls import urlpatterns

    examples: dict[str, str] = {}
    urls = []
    for pattern in urlpatterns:
        kwargs = {name: examples[name] for name in pattern.pattern.converters}
        urls.append((str(pattern.name), reverse(f"dashboard:{pattern.name}", kwargs=kwargs)))
    return urls


@pytest.mark.parametrize(("name", "url"), _every_dashboard_url())
def test_every_dashboard_url_refuses_a_customer(member_client: Client, name: str, url: str) -> None:
    for response in (member_client.get(url), member_client.post(url, "{}", content_type="application/json")):
        assert response.status_code in (403, 405), name


@pytest.mark.parametrize(("name", "url"), _every_dashboard_url())
def test_the_dashboard_writes_nothing_itself(staff_client: Client, name: str, url: str) -> None:
    """Every lever is /api/v1/: the dashboard's own URLs only read."""
    for method in ("post", "put", "patch", "delete"):
        assert getattr(staff_client, method)(url, "{}", content_type="application/json").status_code == 405, name


def test_a_lever_through_the_api_announces_its_change_to_the_dashboards(
    staff_client: Client, tenants: Tenants, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(events, "broadcast", lambda group, message: sent.append((group, message)))
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post("/api/v1/orgs/acme/hold/", "{}", content_type="application/json")
    assert response.status_code == 200
    assert (events.STAFF_GROUP, {"kind": "org", "org": tenants.org_a.pk}) in sent
