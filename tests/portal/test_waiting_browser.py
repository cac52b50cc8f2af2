"""The reasons in the customer's words, in real headless Chromium under the Content-Security-Policy:
a held org's chart page, a retry's page, the partner's rate limit, and the org table."""

from __future__ import annotations

import os
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from charts.models import ChartEvent, ChartState
from common.actors import Actor
from orgs.services import org_hold
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


def test_a_customer_reads_why_each_chart_waits(live_url: str, chromium: Any, tenants: Tenants) -> None:
    until = timezone.now() + timedelta(minutes=6)
    failed = timezone.now() - timedelta(minutes=1)
    throttled = ChartFactory(
        org=tenants.org_a, external_id="throttled", position=0, waiting_reason="provider_paused", waiting_until=until
    )
    retry = ChartFactory(
        org=tenants.org_a, external_id="retry", state=ChartState.RETRY_WAIT, attempt=1, available_at=until,
        position=1, waiting_reason="backoff", waiting_until=until,
    )  # fmt: skip
    ChartEvent.objects.create(chart=retry, from_state="running", to_state="retry_wait", actor="x", at=failed)
    held = ChartFactory(org=tenants.org_b, external_id="held", position=0, waiting_reason="turn")
    org_hold(org=tenants.org_b, actor=Actor("user:test", staff=True))

    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(f"{live_url}/portal/acme/charts/{throttled.pk}/")
    assert (
        page.locator("dd.why").inner_text()
        == f"Waiting for the partner's rate limit until {until.astimezone(UTC):%H:%M} UTC"
    )
    page.goto(f"{live_url}/portal/acme/charts/{retry.pk}/")
    assert page.locator("dd.why").inner_text() == (
        f"Retrying after a failure at {failed.astimezone(UTC):%H:%M} UTC (try 2 of 3), "
        f"not before {until.astimezone(UTC):%H:%M} UTC"
    )
    page.goto(f"{live_url}/portal/acme/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
    assert page.locator("td .why").all_inner_texts() == [
        f"Waiting for the partner's rate limit until {until.astimezone(UTC):%H:%M} UTC",
        f"Retrying after a failure (try 2 of 3), not before {until.astimezone(UTC):%H:%M} UTC",
    ]
    context.close()

    other = chromium.new_context()
    other.add_cookies([session_cookie(tenants.member_b, live_url)])
    held_page = other.new_page()
    held_violations = Violations(held_page)
    held_page.goto(f"{live_url}/portal/beta/charts/{held.pk}/")
    assert (
        held_page.locator("dd.why").inner_text() == "Your organisation is on hold: its charts wait until it is released"
    )
    other.close()
    assert violations.seen == []
    assert held_violations.seen == []


def test_the_times_a_chart_waits_for_read_in_the_viewers_zone(live_url: str, chromium: Any, tenants: Tenants) -> None:
    """Found on `make run`: the page said when a chart was expected to start in UTC ("about 11:19 UTC")
    beside its start and ETA in the viewer's zone ("06:19:28 GMT-5")."""
    until = timezone.now() + timedelta(minutes=6)
    chart = ChartFactory(org=tenants.org_a, position=0, waiting_reason="budget", waiting_until=until)
    context = chromium.new_context(timezone_id="America/New_York")
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    local = until.astimezone(ZoneInfo("America/New_York"))
    zone = "GMT-5" if local.utcoffset() == timedelta(hours=-5) else "GMT-4"
    words = f"Waiting for capacity in the shared pool, expected to start at about {local:%H:%M} {zone}"
    page.wait_for_function(f"() => document.querySelector('dd.why').innerText === {words!r}")
    page.goto(f"{live_url}/portal/acme/")
    page.wait_for_function(f"() => document.querySelector('span.why').innerText === {words!r}")

    assert not violations.seen, violations.seen
    context.close()
