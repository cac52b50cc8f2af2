"""The zone is the account's, in real headless Chromium against daphne: chosen in one browser (the
portal's, the dashboard's or the admin's picker), every browser of the account shows it from the first
paint, never UTC first; another account keeps its browser's zone. The drain plot's numbers, as a table
a keyboard opens, in that zone too, on the portal and on the dashboard, with axe-core passing."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from charts.models import Chart
from orgs.selectors import viewer_zone
from orgs.services import viewer_zone_set
from tests.axe import wcag_violations
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ChartFactory, charts_with_bands

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SUBMITTED = datetime(2026, 3, 1, 23, 59, 58, tzinfo=UTC)
SUBMITTED_TIME = "dt:text-is('Submitted') + dd time"

# Before every frame is painted (and as the document is parsed), any time shown in UTC is noted.
WATCH_FOR_UTC = """
window.shownInUtc = [];
const look = () => document.querySelectorAll("time[datetime]").forEach((time) => {
  const shown = getComputedStyle(time).visibility !== "hidden";
  if (shown && /UTC$/.test(time.textContent)) window.shownInUtc.push(time.textContent);
});
const frame = () => { look(); if (!window.watched) requestAnimationFrame(frame); };
requestAnimationFrame(frame);
document.addEventListener("readystatechange", look);
addEventListener("load", () => setTimeout(() => { look(); window.watched = true; }, 300));
"""


def browser_of(chromium: Any, user: Any, live_url: str, zone: str) -> Any:
    context = chromium.new_context(timezone_id=zone, viewport={"width": 1400, "height": 1000})
    context.add_cookies([session_cookie(user, live_url)])
    return context


def a_chart_submitted(tenants: Tenants) -> Chart:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="tz-account")
    Chart.objects.filter(pk=chart.pk).update(created_at=SUBMITTED)
    return chart


def test_two_browsers_of_one_account_show_the_zone_chosen_in_either(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    chart = a_chart_submitted(tenants)
    url = f"{live_url}/portal/acme/charts/{chart.pk}/"
    tokyo = browser_of(chromium, tenants.member_a, live_url, "Asia/Tokyo").new_page()
    new_york = browser_of(chromium, tenants.member_a, live_url, "America/New_York").new_page()
    other = browser_of(chromium, tenants.member_b, live_url, "Asia/Tokyo").new_page()
    violations = Violations(tokyo)

    tokyo.goto(url)
    new_york.goto(url)
    # No zone chosen yet: each browser its own.
    assert tokyo.locator(SUBMITTED_TIME).inner_text() == "2026-03-02 08:59:58 GMT+9"
    assert new_york.locator(SUBMITTED_TIME).inner_text() == "2026-03-01 18:59:58 GMT-5"

    tokyo.select_option("#zone-choice", "Europe/Berlin")
    expect(tokyo.locator("#zone-status")).to_have_text("Saved: times are in Europe/Berlin in every browser of yours.")
    assert tokyo.locator(SUBMITTED_TIME).inner_text() == "2026-03-02 00:59:58 CET"
    assert viewer_zone(user_id=tenants.member_a.pk) == "Europe/Berlin"

    new_york.reload()
    assert new_york.locator(SUBMITTED_TIME).inner_text() == "2026-03-02 00:59:58 CET"
    assert new_york.locator("#zone-choice").input_value() == "Europe/Berlin"
    new_york.goto(f"{live_url}/portal/acme/")
    assert new_york.locator("[data-zone-name]").first.inner_text().startswith("Times are in Europe/Berlin (")
    new_york.goto(url)

    # Another account (org B's member, a Tokyo browser) is unaffected.
    other.goto(f"{live_url}/portal/beta/")
    assert other.locator("[data-zone-name]").first.inner_text().startswith("Times are in Asia/Tokyo (")
    assert other.locator("#zone-choice").input_value() == ""

    # Back to the browser's own, from the other browser: each shows its own again.
    new_york.select_option("#zone-choice", "")
    expect(new_york.locator(SUBMITTED_TIME)).to_have_text("2026-03-01 18:59:58 GMT-5")
    tokyo.reload()
    assert tokyo.locator(SUBMITTED_TIME).inner_text() == "2026-03-02 08:59:58 GMT+9"
    tokyo.screenshot(path="/tmp/f_zone_account_tokyo.png", full_page=True)
    assert wcag_violations(tokyo) == []
    assert not violations.seen, violations.seen


def test_the_accounts_zone_is_shown_from_the_first_paint(live_url: str, chromium: Any, tenants: Tenants) -> None:
    chart = a_chart_submitted(tenants)
    viewer_zone_set(user=tenants.member_a, zone="Europe/Berlin")
    page = browser_of(chromium, tenants.member_a, live_url, "Asia/Tokyo").new_page()
    page.add_init_script(WATCH_FOR_UTC)

    for path in (f"/portal/acme/charts/{chart.pk}/", "/portal/acme/"):
        page.goto(live_url + path)
        page.wait_for_function("() => window.watched === true")
        assert page.evaluate("() => window.shownInUtc") == [], path
    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    assert page.locator(SUBMITTED_TIME).inner_text() == "2026-03-02 00:59:58 CET"

    # The watch sees a flash when there is one: without the rule that hides the times until they are
    # shown in the zone, the parsed page shows them in UTC first.
    bare = browser_of(chromium, tenants.member_a, live_url, "Asia/Tokyo").new_page()
    bare.route("**/static/zone.css", lambda route: route.fulfill(status=200, content_type="text/css", body=""))
    bare.add_init_script(WATCH_FOR_UTC)
    bare.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    bare.wait_for_function("() => window.watched === true")
    assert "2026-03-01 23:59:58 UTC" in bare.evaluate("() => window.shownInUtc")


def test_a_bad_zone_is_refused_and_the_page_says_so(live_url: str, chromium: Any, tenants: Tenants) -> None:
    page = browser_of(chromium, tenants.member_a, live_url, "Asia/Tokyo").new_page()
    page.goto(f"{live_url}/portal/acme/")
    page.evaluate(
        """() => { const option = document.createElement("option"); option.value = option.textContent = "Mars/Olympus";
                   document.getElementById("zone-choice").appendChild(option); }"""
    )
    page.select_option("#zone-choice", "Mars/Olympus")
    expect(page.locator("#zone-status")).to_contain_text("The zone was not saved: zone must be an IANA time zone name")
    assert page.locator("#zone-choice").input_value() == ""
    assert viewer_zone(user_id=tenants.member_a.pk) is None


def test_the_admins_and_the_dashboards_pickers_set_the_same_zone(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    chart = a_chart_submitted(tenants)
    Chart.objects.filter(pk=chart.pk).update(created_at=SUBMITTED)
    admin = browser_of(chromium, tenants.staff, live_url, "Asia/Tokyo").new_page()
    dashboard = browser_of(chromium, tenants.staff, live_url, "America/New_York").new_page()
    violations = Violations(admin)

    admin.goto(f"{live_url}/admin/charts/chart/{chart.pk}/change/")
    admin.select_option("#zone-choice", "Asia/Kolkata")
    expect(admin.locator("[data-zone-name]")).to_contain_text("Times are in Asia/Kolkata (")
    assert admin.locator(".field-created_at time").inner_text() == "2026-03-02 05:29:58 GMT+5:30"
    assert not violations.seen, violations.seen
    # axe on the admin's own templates (the org page's; its autocompletes' script sets inline styles,
    # which the policy refuses: not this test's matter).
    admin.goto(f"{live_url}/admin/orgs/org/{tenants.org_a.pk}/change/")
    expect(admin.locator("#zone-choice")).to_have_value("Asia/Kolkata")
    assert wcag_violations(admin) == []

    dashboard.goto(f"{live_url}/dashboard/")
    dashboard.wait_for_selector("body[data-live=live]", timeout=10_000)
    assert dashboard.locator("[data-zone-name]").inner_text().startswith("Times are in Asia/Kolkata (")
    dashboard.select_option("#zone-choice", "UTC")
    expect(dashboard.locator("[data-zone-name]")).to_contain_text("Times are in UTC (")

    admin.goto(f"{live_url}/admin/charts/chart/")
    assert admin.locator("#zone-choice").input_value() == "UTC"
    admin.goto(f"{live_url}/admin/charts/chart/{chart.pk}/change/")
    assert admin.locator(".field-created_at time").inner_text() == "2026-03-01 23:59:58 UTC"
    admin.screenshot(path="/tmp/f_zone_admin_chart.png", full_page=True)


def test_the_admins_note_under_a_datetime_input_names_the_accounts_zone_not_the_server(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    """Django's widgets say "Note: You are 10.5 hours behind server time." where the browser's zone is
    not the one the form reads in; on `make run` that zone is the account's (named beside the input),
    not the server's, so the note now says which zone it is and how far this browser is from it."""
    viewer_zone_set(user=tenants.staff, zone="Asia/Kolkata")
    page = browser_of(chromium, tenants.staff, live_url, "America/New_York").new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/admin/orgs/providerpause/add/")

    note = page.locator(".field-until .timezonewarning")
    expect(note).to_have_text(
        "Note: the times here are in Asia/Kolkata, your account's zone: 10.5 hours ahead of this browser."
    )
    assert "server" not in page.locator("#content").inner_text()
    assert not violations.seen, violations.seen


def test_the_drain_plots_numbers_are_a_table_a_keyboard_opens(live_url: str, chromium: Any, tenants: Tenants) -> None:
    charts_with_bands(tenants.org_a, tenants.workflow)
    viewer_zone_set(user=tenants.member_a, zone="Asia/Tokyo")
    page = browser_of(chromium, tenants.member_a, live_url, "America/New_York").new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/portal/acme/")
    summary = page.locator("#drain-numbers summary")
    assert not page.locator("#drain-numbers table").is_visible()

    for _ in range(80):  # Tab from the top until the summary has the focus
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('#drain-numbers summary')"):
            break
    else:
        pytest.fail("Tab never reached the drain plot's table")
    page.keyboard.press("Enter")
    table = page.locator("#drain-numbers table")
    expect(table).to_be_visible()
    rows = table.locator("tbody tr")
    assert rows.count() == 5
    assert rows.first.locator("th").inner_text().startswith("now, ")
    assert rows.first.locator("td").all_inner_texts() == ["3", "3"]
    assert rows.last.locator("td").all_inner_texts() == ["0", "0"]
    assert rows.first.locator("time").inner_text().endswith(" GMT+9")
    assert summary.get_attribute("aria-expanded") in (None, "true")
    assert wcag_violations(page) == []
    page.screenshot(path="/tmp/f_drain_table.png", full_page=True)
    assert not violations.seen, violations.seen


def test_the_dashboards_clear_time_plot_has_its_table(live_url: str, chromium: Any, tenants: Tenants) -> None:
    now = timezone.now()
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, eta=now + timedelta(minutes=30))
    tenants.org_a.clear_at = now + timedelta(minutes=30)
    tenants.org_a.save()
    viewer_zone_set(user=tenants.staff, zone="Asia/Tokyo")
    page = browser_of(chromium, tenants.staff, live_url, "America/New_York").new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    page.wait_for_selector("#plot-timeline-rows th:text-is('acme')", state="attached", timeout=10_000)

    page.locator("#plot-timeline-numbers summary").focus()
    page.keyboard.press("Enter")
    row = page.locator("#plot-timeline-rows tr", has=page.locator("th:text-is('acme')"))
    expect(row).to_be_visible()
    assert row.locator("time").first.inner_text().endswith(" GMT+9")
    assert wcag_violations(page) == []
    page.screenshot(path="/tmp/f_dashboard_timeline_table.png")
    assert not violations.seen, violations.seen
