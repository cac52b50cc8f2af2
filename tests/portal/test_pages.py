"""The customer portal: a member sees their org's charts and nothing of any other org."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.test import Client
from django.utils import timezone

from charts.models import Chart, ChartState
from knobs.models import SchedulerConfig
from tests.conftest import Tenants
from tests.factories import ChartFactory, MembershipFactory, OrgFactory

Browser = Callable[[Any], Client]


@pytest.fixture
def charts(tenants: Tenants) -> tuple[Chart, Chart]:
    now = timezone.now()
    mine = ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        external_id="acme-report-1",
        position=0,
        predicted_start=now + timedelta(minutes=2),
        eta=now + timedelta(minutes=5),
        eta_low=now + timedelta(minutes=4),
        eta_high=now + timedelta(minutes=7),
        attempt=1,
        last_error='ConnectionError: upstream said no\nTraceback (most recent call last):\n  File "/srv/app/secret.py"',
    )
    theirs = ChartFactory(org=tenants.org_b, workflow=tenants.workflow, external_id="beta-secret-1", position=1)
    return mine, theirs


def test_login_required(tenants: Tenants, browser: Browser) -> None:
    for url in ["/portal/", "/portal/acme/", "/portal/acme/table/", "/portal/acme/charts/1/"]:
        response = browser(None).get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_root_and_portal_go_to_the_first_org(tenants: Tenants, browser: Browser) -> None:
    assert browser(None).get("/")["Location"] == "/portal/"
    response = browser(tenants.member_a).get("/portal/")
    assert response.status_code == 302
    assert response["Location"] == "/portal/acme/"


def test_outsider_is_told_they_have_no_org(tenants: Tenants, browser: Browser) -> None:
    response = browser(tenants.outsider).get("/portal/")

    assert response.status_code == 200
    assert b"not a member of any organisation" in response.content


def test_member_sees_their_charts_only(tenants: Tenants, browser: Browser, charts: tuple[Chart, Chart]) -> None:
    response = browser(tenants.member_a).get("/portal/acme/")
    html = response.content.decode()

    assert response.status_code == 200
    assert "acme-report-1" in html
    assert "ConnectionError: upstream said no" in html
    assert "secret" not in html.lower()
    assert "Beta" not in html
    assert "beta" not in html
    assert 'data-ws-path="/ws/portal/acme/"' in html


@pytest.mark.parametrize("who", ["member_b", "outsider", "staff"])
def test_another_orgs_pages_are_404(tenants: Tenants, browser: Browser, charts: tuple[Chart, Chart], who: str) -> None:
    mine, _ = charts
    client = browser(getattr(tenants, who))

    assert client.get("/portal/acme/").status_code == 404
    assert client.get("/portal/acme/table/").status_code == 404
    assert client.get(f"/portal/acme/charts/{mine.pk}/").status_code == 404


def test_a_chart_of_another_org_is_404_even_under_the_members_own_slug(
    tenants: Tenants, browser: Browser, charts: tuple[Chart, Chart]
) -> None:
    _, theirs = charts
    client = browser(tenants.member_a)

    assert client.get(f"/portal/acme/charts/{theirs.pk}/").status_code == 404
    assert client.get(f"/portal/beta/charts/{theirs.pk}/").status_code == 404
    assert client.get("/portal/no-such-org/").status_code == 404


def test_chart_page(tenants: Tenants, browser: Browser, charts: tuple[Chart, Chart]) -> None:
    mine, _ = charts

    html = browser(tenants.member_a).get(f"/portal/acme/charts/{mine.pk}/").content.decode()

    assert "acme-report-1" in html
    assert "ConnectionError: upstream said no" in html
    assert "secret.py" not in html
    assert "likely between" in html


def test_clear_time_and_counts_are_the_orgs_own(tenants: Tenants, browser: Browser, charts: Any) -> None:
    tenants.org_a.clear_at = timezone.now() + timedelta(hours=2)
    tenants.org_a.save()
    ChartFactory.create_batch(7, org=tenants.org_b, workflow=tenants.workflow, state=ChartState.RUNNING)

    response = browser(tenants.member_a).get("/portal/acme/")

    assert "predicted to be done by" in response.content.decode()
    assert response.context["summary"].counts[ChartState.RUNNING] == 0
    assert response.context["summary"].counts[ChartState.QUEUED] == 1


def test_search_filter_and_paginate(tenants: Tenants, browser: Browser) -> None:
    for i in range(60):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id=f"batch-{i:02d}", position=i)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="odd-one", state=ChartState.PAUSED)
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, external_id="batch-beta", position=0)
    client = browser(tenants.member_a)

    first = client.get("/portal/acme/")
    second = client.get("/portal/acme/?page=2")
    searched = client.get("/portal/acme/?q=batch-5")
    paused = client.get("/portal/acme/?state=paused")
    nonsense = client.get("/portal/acme/?state=bogus&page=99")

    assert len(first.context["rows"]) == 50
    assert first.context["rows"][0][0].external_id == "batch-00"  # queue order
    assert len(second.context["rows"]) == 11
    assert [c.external_id for c, *_ in searched.context["rows"]] == [f"batch-5{i}" for i in range(10)]
    assert [c.external_id for c, *_ in paused.context["rows"]] == ["odd-one"]
    assert nonsense.status_code == 200
    assert "batch-beta" not in first.content.decode() + second.content.decode()


def test_org_switcher_for_a_member_of_several(tenants: Tenants, browser: Browser, charts: Any) -> None:
    MembershipFactory(user=tenants.member_a, org=tenants.org_b)
    client = browser(tenants.member_a)

    acme = client.get("/portal/acme/").content.decode()
    beta = client.get("/portal/beta/").content.decode()

    assert 'href="/portal/beta/"' in acme
    assert "beta-secret-1" in beta
    assert "acme-report-1" not in beta


def test_single_org_member_has_no_switcher(tenants: Tenants, browser: Browser) -> None:
    OrgFactory(slug="gamma", name="Gamma")

    html = browser(tenants.member_a).get("/portal/acme/").content.decode()

    assert "Your organisations" not in html
    assert "Gamma" not in html


def test_table_fragment(tenants: Tenants, browser: Browser, charts: Any) -> None:
    response = browser(tenants.member_a).get("/portal/acme/table/?q=acme")

    assert response.status_code == 200
    assert b"acme-report-1" in response.content
    assert b"<html" not in response.content


def test_list_page_query_count_is_constant(
    tenants: Tenants, browser: Browser, django_assert_max_num_queries: Any
) -> None:
    SchedulerConfig.load()  # the row exists once the scheduler has run
    client = browser(tenants.member_a)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    # One query more than before for the drain plot, one for the workflows of a member's submit form,
    # two for the plan's freshness (the replan interval, the latest replan), one for the retry policy
    # that each row's tries are told against ("try 2 of 3").
    with django_assert_max_num_queries(12):
        client.get("/portal/acme/")
    for _ in range(40):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    with django_assert_max_num_queries(12):
        assert len(client.get("/portal/acme/").context["rows"]) == 41
    with django_assert_max_num_queries(11):
        client.get("/portal/acme/table/")


def test_login_page_and_csrf(tenants: Tenants) -> None:
    client = Client(enforce_csrf_checks=True)

    page = client.get("/accounts/login/")
    refused = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"})

    assert page.status_code == 200
    assert b'name="csrfmiddlewaretoken"' in page.content
    assert refused.status_code == 403


def test_login_then_portal(tenants: Tenants) -> None:
    client = Client()

    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-for-tests-1"}, follow=True)

    assert response.redirect_chain[-1][0] == "/portal/acme/"


def test_oversized_form_body_is_not_a_500(tenants: Tenants, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = Client().post("/accounts/login/", {"username": "x" * 500, "password": "y"})

    assert response.status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/", "/api/docs/"])
def test_pages_name_an_icon_that_exists(client: Client, path: str) -> None:
    """Browsers ask for an icon; without one named, every page load logged a 404 for /favicon.ico
    (the admin's login page did on `make run`: the portal's and the dashboard's name theirs)."""
    page = client.get(path).content.decode()
    (href,) = re.findall(r'<link rel="icon" href="([^"]+)"', page)
    assert href.startswith(static(""))
    assert finders.find(href.removeprefix(static(""))) is not None


def test_the_chart_list_says_how_far_back_its_history_goes(
    tenants: Tenants, browser: Browser, charts: tuple[Chart, Chart], settings: Any
) -> None:
    settings.FAIRSCHED_RETENTION_DAYS = 90
    page = browser(tenants.member_a).get("/portal/acme/").content.decode()
    assert "History is kept for 90 days" in page
    settings.FAIRSCHED_RETENTION_DAYS = 1
    assert "History is kept for 1 day:" in browser(tenants.member_a).get("/portal/acme/").content.decode()
    settings.FAIRSCHED_RETENTION_DAYS = 0  # everything is kept: nothing to say
    assert "History is kept" not in browser(tenants.member_a).get("/portal/acme/").content.decode()
