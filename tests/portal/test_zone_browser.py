"""Times in the viewer's zone with the zone named, in real headless Chromium against daphne: the portal
and the dashboard show a Tokyo browser its own clock (to the second, the zone's name beside), a chosen
zone replaces the browser's and is kept (the account's, in every browser of it:
tests/test_zone_account_browser.py), and durations are split after rounding ("1m00s", never "0m60s"
nor "8m60s")."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ChartFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SUBMITTED = datetime(2026, 3, 1, 23, 59, 58, tzinfo=UTC)


def test_the_portal_shows_the_viewers_zone_and_keeps_a_chosen_one(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="tz-1")
    type(chart).objects.filter(pk=chart.pk).update(created_at=SUBMITTED)
    context = chromium.new_context(timezone_id="Asia/Tokyo")
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/portal/acme/")
    page.wait_for_selector("[data-zone-name]:has-text('Asia/Tokyo')")

    tokyo = SUBMITTED.astimezone(ZoneInfo("Asia/Tokyo"))
    assert tokyo.strftime("%Y-%m-%d %H:%M:%S") == "2026-03-02 08:59:58"  # the next day there
    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    submitted = page.locator("dt:text-is('Submitted') + dd time")
    assert submitted.inner_text() == "2026-03-02 08:59:58 GMT+9"
    page.screenshot(path="/tmp/f_zone_tokyo.png", full_page=True)

    page.select_option("#zone-choice", "Europe/Berlin")
    expect(submitted).to_have_text("2026-03-02 00:59:58 CET")
    page.reload()
    assert page.locator("dt:text-is('Submitted') + dd time").inner_text() == "2026-03-02 00:59:58 CET"
    page.select_option("#zone-choice", "")
    expect(page.locator("dt:text-is('Submitted') + dd time")).to_have_text("2026-03-02 08:59:58 GMT+9")
    assert not violations.seen, violations.seen


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(59.4, "59s"), (59.6, "1m00s"), (119.5, "2m00s"), (539.6, "9m00s"), (3599.5, "1h00m"), (86399.6, "1d0h")],
)
def test_durations_are_split_after_rounding(
    live_url: str, chromium: Any, tenants: Tenants, seconds: float, words: str
) -> None:
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    page.goto(f"{live_url}/dashboard/")
    page.wait_for_function("window.fairschedZone !== undefined")
    assert page.evaluate("s => window.fairschedZone.duration(s)", seconds) == words


def test_the_dashboard_names_the_viewers_zone(live_url: str, chromium: Any, tenants: Tenants) -> None:
    context = chromium.new_context(timezone_id="America/New_York", viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    assert page.locator("[data-zone-name]").inner_text().startswith("Times are in America/New_York (")
    page.screenshot(path="/tmp/f_zone_dashboard.png")
    assert not violations.seen, violations.seen
