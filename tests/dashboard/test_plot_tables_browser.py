"""The dashboard's queue-depth and budget plots each have their numbers as a table (a <details> the
keyboard opens), in the viewer's zone, kept open and current across live redraws, axe passing; in real
headless Chromium against daphne."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone
from playwright.sync_api import expect

from common.events import STAFF_GROUP, broadcast
from orgs.services import viewer_zone_set
from scheduling.models import QueueSample
from tests.axe import wcag_violations
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def sampled(at: Any, index: int) -> QueueSample:
    return QueueSample.objects.create(
        at=at, queued=100 + index, running=index % 5, budget=40, cost_in_use=index % 40, global_clear=None
    )


def a_replan_elsewhere(at: Any) -> None:
    """A new sample and the replan's hint, from another thread (the test's runs Playwright's loop)."""

    def replan() -> None:
        try:
            sampled(at, 99)
            broadcast(STAFF_GROUP, {"kind": "plan"})
        finally:
            connections.close_all()

    thread = threading.Thread(target=replan)
    thread.start()
    thread.join()


def test_the_depth_and_budget_plots_have_their_tables(live_url: str, chromium: Any, tenants: Tenants) -> None:
    now = timezone.now()
    for index in range(45):  # one a minute, the oldest 45 minutes ago
        sampled(now - timedelta(minutes=45 - index), index)
    viewer_zone_set(user=tenants.staff, zone="Asia/Tokyo")
    context = chromium.new_context(timezone_id="America/New_York", viewport={"width": 1400, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)

    for plot, columns in (("depth", ["Queued", "Running"]), ("budget", ["Cost in use", "Budget"])):
        details = page.locator(f"#plot-{plot}-numbers")
        assert not details.locator("table").is_visible()
        details.locator("summary").focus()
        page.keyboard.press("Enter")
        expect(details.locator("table")).to_be_visible()
        assert details.locator("thead th").all_inner_texts() == ["At", *columns]
        rows = details.locator("tbody tr")
        expect(rows).to_have_count(13)  # 12 of the 45 samples, and the row that says so
        assert rows.last.inner_text() == "12 of the plot's 45 samples, evenly spread"
        newest, oldest = rows.nth(0), rows.nth(11)
        assert newest.locator("time").inner_text().endswith(" GMT+9")
        expected = {"depth": (["144", "4"], ["100", "0"]), "budget": (["4", "40"], ["0", "40"])}[plot]
        assert newest.locator("td").all_inner_texts() == expected[0]
        assert oldest.locator("td").all_inner_texts() == expected[1]

    # A replan redraws both plots: the tables stay open and show the new sample first.
    a_replan_elsewhere(timezone.now())
    depth = page.locator("#plot-depth-numbers tbody tr").first
    expect(depth.locator("td").first).to_have_text("199", timeout=10_000)
    assert page.locator("#plot-depth-numbers").get_attribute("open") is not None
    assert page.locator("#plot-budget-numbers").get_attribute("open") is not None
    assert page.locator("#plot-budget-numbers tbody tr").first.locator("td").all_inner_texts() == ["19", "40"]
    said = page.locator("#plot-depth-numbers tbody tr").last.inner_text()
    assert said == "12 of the plot's 46 samples, evenly spread"

    assert wcag_violations(page) == []
    page.locator("#plot-depth").scroll_into_view_if_needed()
    page.screenshot(path="/tmp/zone2_plot_tables.png", full_page=True)
    assert not violations.seen, violations.seen
    context.close()
