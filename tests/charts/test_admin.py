"""Charts in the admin: filters, search, the event history, and actions that go through the services."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from charts.models import Chart, ChartEvent, ChartState, DurationStat
from orgs.models import OrgChange
from tests.admin_helpers import action_data, change_form_data, messages_of
from tests.conftest import Tenants
from tests.factories import ChartFactory, OrgFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

STAFF = "user:stella"
CHARTS = reverse("admin:charts_chart_changelist")


@pytest.fixture
def staff_client(client: Client, tenants: Tenants) -> Client:
    client.force_login(tenants.staff)
    return client


def listed(client: Client, query: str = "") -> set[str]:
    response = client.get(f"{CHARTS}{query}")
    assert response.status_code == 200
    context: Any = response.context
    return {chart.external_id for chart in context["cl"].result_list}


def test_changelist_filters_by_org_state_workflow_and_priority_and_searches_external_ids(
    staff_client: Client, tenants: Tenants
) -> None:
    simulate = WorkflowFactory(name="simulate")
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="a-queued")
    ChartFactory(org=tenants.org_a, workflow=simulate, external_id="a-running", state=ChartState.RUNNING)
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, external_id="b-queued", high_priority=True)
    assert listed(staff_client) == {"a-queued", "a-running", "b-queued"}
    assert listed(staff_client, f"?org__id__exact={tenants.org_a.pk}") == {"a-queued", "a-running"}
    assert listed(staff_client, "?state__exact=queued") == {"a-queued", "b-queued"}
    assert listed(staff_client, f"?workflow__id__exact={simulate.pk}") == {"a-running"}
    assert listed(staff_client, "?high_priority__exact=1") == {"b-queued"}
    assert listed(staff_client, "?q=b-que") == {"b-queued"}
    assert listed(staff_client, "?q=nothing-like-it") == set()


def test_changelist_query_count_does_not_grow_with_charts(
    staff_client: Client, tenants: Tenants, django_assert_max_num_queries: Any
) -> None:
    orgs = [tenants.org_a, tenants.org_b, OrgFactory()]
    workflows = [tenants.workflow, WorkflowFactory(), WorkflowFactory()]
    for index in range(60):
        ChartFactory(org=orgs[index % 3], workflow=workflows[index % 3], position=index)
    # session, user, the org and the workflow choices of the filters, the count of matching charts, and
    # the page of charts with their orgs and workflows joined.
    with django_assert_max_num_queries(6):
        response = staff_client.get(f"{CHARTS}?state__exact=queued")
    assert len(response.context["cl"].result_list) == 60


def test_change_page_shows_the_event_history_read_only(staff_client: Client, tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="job-1")
    ChartEvent.objects.create(chart=chart, from_state="", to_state="queued", actor="user:alice", reason="submitted")
    response = staff_client.get(reverse("admin:charts_chart_change", args=[chart.pk]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "event history" in page.lower()
    assert "user:alice" in page
    assert 'name="events-0-actor"' not in page
    assert 'name="external_id"' not in page  # a saved chart is changed only through the actions
    assert staff_client.get(reverse("admin:charts_chart_delete", args=[chart.pk])).status_code == 403


def test_pause_and_resume_actions(staff_client: Client, tenants: Tenants) -> None:
    queued = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="q")
    running = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="r", state=ChartState.RUNNING)
    response = staff_client.post(CHARTS, action_data("pause", queued.pk, running.pk), follow=True)
    shown = messages_of(response)
    assert "Paused 1 item(s)." in shown
    assert any(m.startswith("acme/r: chart") and "cannot go from running to paused" in m for m in shown)
    assert Chart.objects.get(pk=queued.pk).state == ChartState.PAUSED
    assert Chart.objects.get(pk=running.pk).state == ChartState.RUNNING
    response = staff_client.post(CHARTS, action_data("resume", queued.pk), follow=True)
    assert "Resumed 1 item(s)." in messages_of(response)
    events = ChartEvent.objects.filter(chart=queued).values_list("from_state", "to_state", "actor")
    assert list(events) == [("queued", "paused", STAFF), ("paused", "queued", STAFF)]


def test_high_priority_move_to_top_and_cancel_actions(staff_client: Client, tenants: Tenants) -> None:
    first = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, priority=4)
    last = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    response = staff_client.post(CHARTS, action_data("make_high_priority", last.pk), follow=True)
    assert "Prioritized 1 item(s)." in messages_of(response)
    assert Chart.objects.get(pk=last.pk).high_priority
    response = staff_client.post(CHARTS, action_data("move_to_top", last.pk), follow=True)
    assert "Moved 1 item(s)." in messages_of(response)
    assert Chart.objects.get(pk=last.pk).priority == 5
    response = staff_client.post(CHARTS, action_data("cancel", first.pk), follow=True)
    assert "Cancelled 1 item(s)." in messages_of(response)
    assert Chart.objects.get(pk=first.pk).state == ChartState.CANCELLED
    response = staff_client.post(CHARTS, action_data("cancel", first.pk), follow=True)
    assert any("cannot be cancelled" in message for message in messages_of(response))
    assert ChartEvent.objects.filter(chart=first, actor=STAFF, to_state="cancelled").count() == 1


def test_add_a_chart_goes_through_chart_submit(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:charts_chart_add")
    data = change_form_data(staff_client.get(url))
    data.update(org=tenants.org_a.pk, workflow=tenants.workflow.pk, external_id="by-hand", priority="3")
    data["payload"] = '{"size": 2}'
    response = staff_client.post(url, data, follow=True)
    assert response.status_code == 200
    chart = Chart.objects.get(external_id="by-hand")
    assert (chart.org, chart.state, chart.priority, chart.payload) == (tenants.org_a, "queued", 3, {"size": 2})
    event = ChartEvent.objects.get(chart=chart)
    assert (event.from_state, event.to_state, event.actor) == ("", "queued", STAFF)


def test_a_chart_refused_by_admission_is_not_added(staff_client: Client, tenants: Tenants) -> None:
    full = OrgFactory(slug="full", queue_limit=1)
    ChartFactory(org=full, workflow=tenants.workflow)
    url = reverse("admin:charts_chart_add")
    data = change_form_data(staff_client.get(url))
    data.update(org=full.pk, workflow=tenants.workflow.pk, external_id="one-too-many", priority="0")
    response = staff_client.post(url, data, follow=True)
    assert response.redirect_chain == [(url, 302)]
    shown = messages_of(response)
    assert any("queue limit is 1" in message for message in shown)
    assert not any("successfully" in message for message in shown)
    assert not Chart.objects.filter(external_id="one-too-many").exists()
    assert not ChartEvent.objects.exists()


def test_a_reused_external_id_is_a_form_error(staff_client: Client, tenants: Tenants) -> None:
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="taken")
    url = reverse("admin:charts_chart_add")
    data = change_form_data(staff_client.get(url))
    data.update(org=tenants.org_a.pk, workflow=tenants.workflow.pk, external_id="taken", priority="0")
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert Chart.objects.count() == 1


def test_learned_durations_are_listed_and_forgotten_through_the_service(staff_client: Client, tenants: Tenants) -> None:
    """Account managers see what the ETAs learned of each (org, workflow) and may forget it; a forget
    is logged in the org's history with who did it."""
    learned = DurationStat.objects.create(
        org=tenants.org_a, workflow=tenants.workflow, count=4, total_seconds=50.0, sum_log=4 * 2.5, sum_log_sq=4 * 6.5
    )
    listing = staff_client.get(reverse("admin:charts_durationstat_changelist")).content.decode()
    assert "12.5" in listing  # the mean, in seconds
    assert staff_client.get(reverse("admin:charts_durationstat_add")).status_code == 403
    staff_client.post(
        reverse("admin:charts_durationstat_changelist"), {**action_data("delete_selected", learned.pk), "post": "yes"}
    )
    assert not DurationStat.objects.exists()
    (change,) = OrgChange.objects.filter(org=tenants.org_a, field="learned durations")
    assert change.actor == f"user:{tenants.staff.username}"
