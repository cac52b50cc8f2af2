"""The states in words, in real headless Chromium against daphne: a held org's page names the hold, its
reason and whom to ask (no finish time), and shows the release live; a planned org names its one finish
time alike in the headline, the plot's caption and the table, with the plot's axis in the viewer's zone
to the second; the portal says "Starting", "try 1 of 3", "next" and "12th in line"."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from charts.models import ChartState
from common.actors import Actor
from knobs.models import SchedulerConfig
from orgs.models import Membership
from orgs.services import org_hold, org_release
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ChartFactory, MembershipFactory, UserFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
STAFF = Actor("user:stella", staff=True)


def test_a_held_org_reads_its_hold_reason_and_contact_and_sees_the_release(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    admin = UserFactory(username="ann", email="ann@acme.example", first_name="Ann", last_name="Lee")
    MembershipFactory(user=admin, org=tenants.org_a, role=Membership.Role.ADMIN)
    now = timezone.now()
    for index in range(5):
        ChartFactory(org=tenants.org_a, external_id=f"held-{index}", position=index, eta=now + timedelta(minutes=index))
    tenants.org_a.clear_at = now + timedelta(minutes=4)
    tenants.org_a.save()
    org_hold(org=tenants.org_a, actor=STAFF, reason="your invoice is overdue")
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(f"{live_url}/portal/acme/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
    held = page.locator(".summary .held")
    assert held.locator("p").all_inner_texts() == [
        "Your organisation is on hold: its waiting charts do not start until it is released (5 wait now), so no"
        " finish time is predicted for them.",
        "Reason from your account team: your invoice is overdue",
        "Questions: ask Ann Lee (ann@acme.example), your organisation's admin.",
    ]
    # Nor does any of its waiting charts promise a finish.
    assert set(page.locator("tbody tr td:nth-child(6)").all_inner_texts()) == {"on hold"}
    assert held.locator("a[href='mailto:ann@acme.example']").count() == 1
    assert "predicted to be done" not in page.locator(".summary").inner_text()
    assert page.locator("#drain-plot").count() == 0
    page.screenshot(path="/tmp/f_words_held.png", full_page=True)

    org_release(org=tenants.org_a, actor=STAFF, reason="paid")
    page.wait_for_selector(".summary .held", state="detached", timeout=10_000)
    assert "predicted to be done by" in page.locator(".summary").inner_text()
    context.close()
    assert violations.seen == []


def test_one_finish_time_and_the_customers_words_for_states_tries_and_places(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    SchedulerConfig.objects.update_or_create(id=1, defaults={"max_attempts": 3})
    now = timezone.now()
    eta, low, high = now + timedelta(minutes=3), now + timedelta(minutes=2), now + timedelta(minutes=4)
    early = timedelta(minutes=1)
    ChartFactory(
        org=tenants.org_a, external_id="starting", state=ChartState.DISPATCHING, attempt=1, eta=eta - early,
        eta_low=low - early, eta_high=high - early,
    )  # fmt: skip
    ChartFactory(org=tenants.org_a, external_id="first", position=0, waiting_reason="budget", eta=eta, eta_low=low,
                 eta_high=high)  # fmt: skip
    for index in range(1, 12):
        ChartFactory(org=tenants.org_a, external_id=f"later-{index:02d}", position=index, waiting_reason="turn")
    tenants.org_a.clear_at, tenants.org_a.clear_low, tenants.org_a.clear_high = eta, low, high
    tenants.org_a.save()
    context = chromium.new_context(timezone_id="Europe/Berlin")
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(f"{live_url}/portal/acme/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
    headline = page.locator(".summary .headline").inner_text()
    caption = page.locator("#drain-caption").inner_text()
    berlin = page.locator(".summary .headline time").inner_text()
    assert berlin.endswith("CET")  # the median, in the viewer's zone
    zone = ZoneInfo("Europe/Berlin")
    band = f"{low.astimezone(zone):%H:%M:%S}\u2013{high.astimezone(zone):%H:%M:%S} CET"  # and its band
    for text in (headline, caption):
        assert berlin in text
        assert "median prediction" in text
        assert f"likely between {band}" in text
    assert page.locator("th:text-is('Predicted finish (median)')").count() == 1
    first = page.locator("tr:has(th a:text-is('first'))")
    assert first.locator(".band").inner_text() == f"likely between {band}"
    # The plot's axis in the viewer's zone, to the second over minutes: five distinct labels.
    labels = page.locator("#drain-plot text[data-clock]")
    axis = labels.all_text_contents()
    assert len(set(axis)) == 5
    for index, text in enumerate(axis):
        at = datetime.fromisoformat(labels.nth(index).get_attribute("data-clock") or "")
        assert text == f"{at.astimezone(ZoneInfo('Europe/Berlin')):%H:%M:%S}"

    starting = page.locator("tr:has(th a:text-is('starting'))")
    assert starting.locator(".state").inner_text() == "Starting"
    assert "try 1 of 3" in starting.inner_text()
    assert first.locator("td").nth(2).inner_text() == "next"
    assert page.locator("tr:has(th a:text-is('later-11')) td").nth(2).inner_text() == "12th in line"
    body = page.locator("body").inner_text()
    assert "Dispatching" not in body
    assert "Position" not in body
    page.screenshot(path="/tmp/f_words_planned.png", full_page=True)

    page.click("th a:text-is('starting')")
    page.wait_for_selector("dt:text-is('Tries')")
    assert page.locator("dt:text-is('Tries') + dd").inner_text() == "try 1 of 3"
    assert page.locator("dt:text-is('State') + dd").inner_text() == "Starting"
    assert "(in " not in page.locator("table.history").inner_text()
    page.screenshot(path="/tmp/f_words_chart.png", full_page=True)
    context.close()
    assert violations.seen == []
