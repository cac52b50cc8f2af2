"""The in-flight panel in real headless Chromium: a run past its usual duration says so with its new
ETA and band, and an ETA the clock has passed reads "any moment", never "ago"."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.models import ChartState
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


def test_an_overdue_run_says_so_and_its_eta_never_reads_as_past(live_url: str, chromium: Any, tenants: Tenants) -> None:
    now = timezone.now()
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=now - timedelta(minutes=5),
        claimed_at=now - timedelta(minutes=5), cost=1, eta=now + timedelta(seconds=50),
        eta_low=now + timedelta(seconds=20), eta_high=now + timedelta(minutes=3), expected_duration=60.0,
    )  # fmt: skip
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.clock.install()
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    # The page reads the server's clock from the header (its skew) once the socket's resync brings it.
    page.wait_for_selector("#summary .counts[data-now]", state="attached", timeout=10_000)

    row = page.locator(f'#inflight-rows tr[data-chart="{chart.pk}"]')
    assert "running longer than usual" in row.inner_text()
    eta = row.locator("[data-not-past]").first
    cell = f"document.querySelector('#inflight-rows tr[data-chart=\"{chart.pk}\"] [data-not-past]')"
    page.wait_for_function(f"() => {cell}.textContent.startsWith('in ')")
    assert row.locator(".band").count() == 1
    # The clock moves on 90 s without firing the timers due meanwhile: a fast-forward fired the
    # socket's ping and, the pong unable to arrive inside the jump, its deadline, which closed the
    # socket; the resync then re-read the server's clock (skew) and undid the jump (CI, stop 35).
    page.clock.set_system_time(datetime.now(UTC) + timedelta(seconds=90))
    page.wait_for_function(f"() => {cell}.textContent === 'any moment'")

    assert "ago" not in eta.inner_text()
    assert not violations.seen, violations.seen
    context.close()
