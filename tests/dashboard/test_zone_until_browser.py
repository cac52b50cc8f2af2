"""The dashboard's provider pause reads and offers its "until" in the account's zone, the zone named
beside it, whatever the browser's own zone; in real headless Chromium against daphne."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from orgs.models import ProviderPause
from orgs.services import viewer_zone_set
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ProviderFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_a_pause_until_is_read_in_the_accounts_zone(live_url: str, chromium: Any, tenants: Tenants) -> None:
    ProviderFactory()
    viewer_zone_set(user=tenants.staff, zone="America/New_York")
    context = chromium.new_context(timezone_id="Asia/Tokyo", viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)

    # Offered: a quarter of an hour from now on New York's clock, not Tokyo's; the zone named.
    offered = datetime.fromisoformat(page.input_value("#form-provider [name=until]")).replace(
        tzinfo=ZoneInfo("America/New_York")
    )
    assert abs(offered - (datetime.now(UTC) + timedelta(minutes=15))) < timedelta(minutes=2)
    assert page.inner_text("#provider-until-zone").startswith("America/New_York (")

    page.fill("#form-provider [name=until]", "2027-01-15T09:00")
    page.fill("#form-provider [name=reason]", "429s")
    page.click("#form-provider button[type=submit]")
    page.wait_for_selector("#provider-list :text('paused for everyone')", timeout=5000)
    assert ProviderPause.objects.get().until == datetime(2027, 1, 15, 14, 0, tzinfo=UTC)  # 09:00 EST

    # A summer day (EDT, UTC-4) and the hour the clocks go forward in New York (02:30 does not exist).
    assert page.evaluate("window.fairschedZone.instant('2027-07-01T09:00')") == "2027-07-01T13:00:00.000Z"
    assert page.evaluate("window.fairschedZone.instant('2027-03-14T03:30')") == "2027-03-14T07:30:00.000Z"
    assert page.evaluate("window.fairschedZone.instant('2027-11-07T00:30')") == "2027-11-07T04:30:00.000Z"
    assert page.evaluate("window.fairschedZone.instant('soon')") == "soon"  # the API names the field
    page.screenshot(path="/tmp/zone2_dashboard_until.png", full_page=False)
    assert violations.seen == []

    # An account without a zone: the browser's.
    viewer_zone_set(user=tenants.staff, zone=None)
    page.reload()
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    assert page.evaluate("window.fairschedZone.instant('2027-01-15T09:00')") == "2027-01-15T00:00:00.000Z"
    assert page.inner_text("#provider-until-zone").startswith("Asia/Tokyo (")
    context.close()
