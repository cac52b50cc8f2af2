"""The admin's times in the viewer's zone with the zone named, to the second, in real headless Chromium
against daphne: an org's History page (its own saves and every hold, release and lever change) shows a
Tokyo browser its own clock."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from charts.models import Chart
from common.actors import Actor
from orgs.models import OrgChange
from orgs.services import org_hold, viewer_zone_set
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


def test_the_admins_history_is_in_the_viewers_zone_to_the_second(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    org_hold(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="invoice overdue")
    held = OrgChange.objects.get(org=tenants.org_a, field="hold")
    context = chromium.new_context(timezone_id="Asia/Tokyo")
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(f"{live_url}/admin/orgs/org/{tenants.org_a.pk}/history/")
    page.wait_for_selector("[data-zone-name]:has-text('Asia/Tokyo')")
    shown = page.locator("#org-history tbody th time").first.inner_text()

    assert shown == f"{held.at.astimezone(ZoneInfo('Asia/Tokyo')):%Y-%m-%d %H:%M:%S} GMT+9"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+9", shown)
    assert "{#" not in page.locator("#content").inner_text()
    assert wcag_violations(page) == []
    page.screenshot(path="/tmp/f_zone_admin.png", full_page=True)

    # The change page's history inline too.
    page.goto(f"{live_url}/admin/orgs/org/{tenants.org_a.pk}/change/")
    page.wait_for_selector("[data-zone-name]:has-text('Asia/Tokyo')")
    assert page.locator("td.field-when time").first.inner_text() == shown
    context.close()
    assert violations.seen == []


def test_the_admins_datetime_inputs_are_in_the_accounts_zone(live_url: str, chromium: Any, tenants: Tenants) -> None:
    viewer_zone_set(user=tenants.staff, zone="America/New_York")
    context = chromium.new_context(timezone_id="Asia/Tokyo")
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(f"{live_url}/admin/charts/chart/add/")
    page.wait_for_selector("[data-zone-name]:has-text('America/New_York')")
    named = page.locator(".field-due_at .zone-named")
    assert named.inner_text() == "America/New_York"
    assert named.is_visible()
    page.fill("#id_due_at_0", "2027-01-15")
    page.fill("#id_due_at_1", "09:00:00")
    page.select_option("#id_org", str(tenants.org_a.pk))
    page.select_option("#id_workflow", str(tenants.workflow.pk))
    page.fill("#id_external_id", "due-in-new-york")
    assert violations.seen == [], "\n".join(violations.seen)
    # axe-core (run from the test, not the page) adds <style> elements of its own here, which the policy
    # refuses; and Playwright hides the focused input's caret with one for a screenshot (not asked here).
    assert wcag_violations(page) == []
    page.locator(".field-due_at").screenshot(path="/tmp/zone2_admin_due_at.png", caret="initial")
    violations.seen.clear()
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/charts/chart/")
    chart = Chart.objects.get(external_id="due-in-new-york")
    assert chart.due_at == datetime(2027, 1, 15, 14, 0, tzinfo=UTC)
    context.close()
    assert violations.seen == [], "\n".join(violations.seen)
