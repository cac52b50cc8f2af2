"""A run past its expected duration, on PostgreSQL through the real replan: the plan keeps its
expected duration, the API says `overdue`, and the portal and the dashboard say "running longer than
usual" with its new ETA and band, never an ETA in the past."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from charts.models import Chart, ChartPlan, ChartState
from charts.running import chart_overdue, overdue_words
from common import events
from scheduling.reconcile import duration_record
from scheduling.replan import plan_refresh
from scheduling.selectors import in_flight
from tests.conftest import Tenants
from tests.factories import ChartFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "request_replan", lambda: None)
    monkeypatch.setattr(events, "broadcast", lambda group, message: None)


def running(tenants: Tenants, *, ran: float, external_id: str) -> Chart:
    now = timezone.now()
    return ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, external_id=external_id, state=ChartState.RUNNING,
        attempt=1, runs=1, cost=1, claimed_at=now - timedelta(seconds=ran + 1),
        started_at=now - timedelta(seconds=ran), temporal_workflow_id=f"wf-{external_id}",
    )  # fmt: skip


@pytest.fixture
def runs(tenants: Tenants) -> tuple[Chart, Chart, Chart]:
    """acme/render learned at about a minute with a spread; one run 10 min in (overdue), one 5 s in,
    and one chart waiting behind them."""
    for seconds in (40, 60, 90):
        duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=seconds)
    late = running(tenants, ran=600, external_id="late")
    fresh = running(tenants, ran=5, external_id="fresh")
    waiting = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="waiting")
    return late, fresh, waiting


def test_the_plan_keeps_each_running_chart_s_expected_duration(runs: tuple[Chart, Chart, Chart]) -> None:
    late, fresh, waiting = runs
    begun = timezone.now()
    plan_refresh()

    plans = {plan.chart_id: plan for plan in ChartPlan.objects.all()}
    assert plans[late.pk].expected_duration == plans[fresh.pk].expected_duration
    assert 40 < (plans[late.pk].expected_duration or 0) < 90
    assert plans[waiting.pk].expected_duration is None
    # The overdue run's ETA is after the plan's now, with a band of some width around it.
    late_plan = plans[late.pk]
    assert late_plan.eta is not None
    assert late_plan.eta_low is not None
    assert late_plan.eta_high is not None
    assert begun < late_plan.eta_low < late_plan.eta < late_plan.eta_high
    late_chart, fresh_chart = Chart.objects.get(pk=late.pk), Chart.objects.get(pk=fresh.pk)
    assert chart_overdue(late_chart, now=timezone.now())
    assert not chart_overdue(fresh_chart, now=timezone.now())
    assert not chart_overdue(Chart.objects.get(pk=waiting.pk), now=timezone.now())


def test_the_api_says_overdue_with_the_expected_duration(tenants: Tenants, runs: tuple[Chart, Chart, Chart]) -> None:
    late, fresh, waiting = runs
    plan_refresh()
    client = APIClient()
    client.force_login(tenants.member_a)

    body = {chart.pk: client.get(f"/api/v1/charts/{chart.pk}/").json() for chart in runs}
    listed = {row["id"]: row for row in client.get("/api/v1/charts/").json()["results"]}

    for read in (body, listed):
        assert read[late.pk]["overdue"] is True
        assert read[fresh.pk]["overdue"] is False
        assert read[waiting.pk]["overdue"] is False
        assert read[waiting.pk]["expected_duration"] is None
        assert read[late.pk]["expected_duration"] == pytest.approx(ChartPlan.objects.get(pk=late.pk).expected_duration)
    assert body[late.pk]["eta"] > timezone.now().isoformat()
    # Another org's member: the chart is a 404, as everywhere.
    other = APIClient()
    other.force_login(tenants.member_b)
    assert other.get(f"/api/v1/charts/{late.pk}/").status_code == 404


def test_the_portal_says_running_longer_than_usual(tenants: Tenants, runs: tuple[Chart, Chart, Chart]) -> None:
    late, fresh, _ = runs
    plan_refresh()
    browser = Client()
    browser.force_login(tenants.member_a)

    page = browser.get(reverse("portal:chart", args=[tenants.org_a.slug, late.pk])).content.decode()
    fresh_page = browser.get(reverse("portal:chart", args=[tenants.org_a.slug, fresh.pk])).content.decode()
    table = browser.get(reverse("portal:org", args=[tenants.org_a.slug])).content.decode()

    assert "Running longer than usual (it usually takes about 1 min; 10 min so far)" in page
    assert "likely between" in page  # its new band
    assert re.search(r'<time datetime="[^"]+" data-not-past>[-0-9: ]+ UTC</time> <span class="relative">\(in ', page)
    assert "longer than usual" not in fresh_page
    assert table.count("Running longer than usual") == 1
    assert (
        " ago)"
        not in page.split('<h2 id="history-heading">')[0]
        .split("<dt>Predicted finish (median)</dt>")[1]
        .split("</div>")[0]
    )


def test_a_running_eta_the_clock_has_passed_shows_as_any_moment_now(tenants: Tenants) -> None:
    """Between two replans a run can outlast the ETA the last one gave it: never shown in the past."""
    now = timezone.now()
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=now - timedelta(seconds=70),
        eta=now - timedelta(seconds=3), eta_low=now - timedelta(seconds=5), eta_high=now + timedelta(seconds=20),
        expected_duration=60.0,
    )  # fmt: skip
    browser = Client()
    browser.force_login(tenants.member_a)

    page = browser.get(reverse("portal:chart", args=[tenants.org_a.slug, chart.pk])).content.decode()
    eta_cell = page.split("<dt>Predicted finish (median)</dt>")[1].split("</div>")[0]

    assert "any moment now" in eta_cell
    assert "ago" not in eta_cell
    assert "Running longer than usual" in page

    staff = Client()
    staff.force_login(tenants.staff)
    partial = staff.get("/dashboard/partials/?names=inflight").content.decode()
    assert ">any moment<" in partial
    assert "running longer than usual" in partial


def test_the_dashboard_in_flight_panel_says_it_with_the_new_eta(
    tenants: Tenants, runs: tuple[Chart, Chart, Chart]
) -> None:
    late, fresh, _ = runs
    plan_refresh()
    rows = {row["id"]: row for row in in_flight()["rows"]}
    assert rows[late.pk]["overdue"]
    assert not rows[fresh.pk]["overdue"]
    assert rows[late.pk]["expected"] == ChartPlan.objects.get(pk=late.pk).expected_duration
    assert rows[late.pk]["eta_low"] < rows[late.pk]["eta"] < rows[late.pk]["eta_high"]

    staff = Client()
    staff.force_login(tenants.staff)
    partial = staff.get("/dashboard/partials/?names=inflight").content.decode()

    late_row = partial.split(f'data-chart="{late.pk}"')[1].split("</tr>")[0]
    fresh_row = partial.split(f'data-chart="{fresh.pk}"')[1].split("</tr>")[0]
    assert "running longer than usual" in late_row
    assert "running longer than usual" not in fresh_row
    assert 'data-not-past data-rel="' in late_row
    assert 'class="band"' in late_row
    assert "any moment" not in late_row  # its ETA is ahead


def test_the_words_name_how_long_it_usually_takes_and_has_run(tenants: Tenants) -> None:
    now = timezone.now()
    chart = Chart(state=ChartState.RUNNING, started_at=now - timedelta(hours=2, minutes=5))
    chart.expected_duration = 45.0  # type: ignore[attr-defined]
    assert overdue_words(chart, now=now) == "Running longer than usual (it usually takes about 45 s; 2 h 5 min so far)"
    chart.state = ChartState.SUCCEEDED
    assert overdue_words(chart, now=now) == ""
