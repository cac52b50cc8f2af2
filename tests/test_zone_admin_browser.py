"""The admin's times in the viewer's zone with the zone named, to the second, in real headless Chromium
against daphne: an org's History page (its own saves and every hold, release and lever change) shows a
Tokyo browser its own clock."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from common.actors import Actor
from orgs.models import OrgChange
from orgs.services import org_hold
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
