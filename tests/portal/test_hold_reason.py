"""A hold's reason is written for the customer: the portal shows it on the org's page, its live table
and each chart's page while the hold lasts; other levers' reasons stay internal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from charts.models import Chart, ChartEvent, ChartState
from charts.services import chart_pause
from common.actors import Actor
from orgs.services import org_cap_set, org_hold, org_release, org_weight_set
from tests.conftest import Tenants
from tests.factories import ChartFactory

Browser = Callable[[Any], Client]
SAID = "Reason from your account team: we are moving your data &amp; will resume at 18:00 UTC"


@pytest.fixture
def chart(tenants: Tenants) -> Chart:
    return ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="acme-1", position=0)


def pages(client: Client, chart: Chart) -> list[str]:
    urls = ["/portal/acme/", "/portal/acme/table/", f"/portal/acme/charts/{chart.pk}/"]
    answers = [client.get(url) for url in urls]
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    return [answer.content.decode() for answer in answers]


def test_the_portal_shows_the_hold_s_reason_until_the_release(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    org_hold(
        org=tenants.org_a,
        actor=Actor("user:stella", staff=True),
        reason="we are moving your data & will resume at 18:00 UTC",
    )
    member = browser(tenants.member_a)

    for html in pages(member, chart):
        assert "on hold" in html
        assert SAID in html  # escaped, as every text a person typed

    org_release(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="moved")

    for html in pages(member, chart):
        assert "on hold" not in html
        assert "Reason from your account team" not in html


def test_a_hold_without_reason_or_by_weight_says_only_that_it_is_held(
    tenants: Tenants, browser: Browser, chart: Chart
) -> None:
    org_weight_set(
        org=tenants.org_a, weight=0, actor=Actor("user:stella", staff=True), reason="internal: unpaid invoice"
    )

    for html in pages(browser(tenants.member_a), chart):
        assert "on hold" in html
        assert "Reason from your account team" not in html
        assert "unpaid" not in html


def test_other_levers_reasons_stay_internal(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    org_cap_set(
        org=tenants.org_a, max_concurrency=1, actor=Actor("user:stella", staff=True), reason="internal: cost overrun"
    )
    chart_pause(chart=chart, actor=Actor("user:stella", staff=True), reason="internal: noisy neighbour")

    for html in pages(browser(tenants.member_a), chart):
        assert "internal" not in html
    assert ChartEvent.objects.filter(chart=chart, reason="internal: noisy neighbour").exists()


def test_another_org_s_hold_reason_is_not_shown(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    org_hold(org=tenants.org_b, actor=Actor("user:stella", staff=True), reason="beta's own business")

    html = "".join(pages(browser(tenants.member_a), chart))

    assert "beta's own business" not in html
    assert "beta&#x27;s own business" not in html
    assert browser(tenants.member_b).get("/portal/acme/").status_code == 404


@pytest.mark.parametrize(
    ("reason", "says"), [("x" * 501, "at most 500"), ("bad\x07bell", "U+0007")], ids=["too-long", "control"]
)
def test_a_portal_lever_refuses_a_bad_reason_naming_it(
    tenants: Tenants, browser: Browser, chart: Chart, reason: str, says: str
) -> None:
    response = browser(tenants.member_a).post(f"/portal/acme/charts/{chart.pk}/pause/", {"reason": reason})

    assert response.status_code == 400
    assert says in response.content.decode()
    assert Chart.objects.get(pk=chart.pk).state == ChartState.QUEUED


def test_a_portal_resume_keeps_its_reason(tenants: Tenants, browser: Browser, chart: Chart) -> None:
    chart_pause(chart=chart, actor=Actor("user:alice", staff=True))

    response = browser(tenants.member_a).post(f"/portal/acme/charts/{chart.pk}/resume/", {"reason": "data is in"})

    assert response.status_code == 302
    assert ChartEvent.objects.filter(chart=chart).order_by("id").last().reason == "data is in"  # type: ignore[union-attr]
    assert "data is in" in browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/").content.decode()
