"""A running chart's ETA in real headless Chromium: the page keeps it true while it is open, and once
the clock passes it (before the next replan moves it) it reads "any moment now", never "ago"."""

from __future__ import annotations

import os
import re
from datetime import timedelta
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


def test_an_overdue_run_s_eta_never_reads_as_past(live_url: str, chromium: Any, tenants: Tenants) -> None:
    now = timezone.now()
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=now - timedelta(minutes=5),
        eta=now + timedelta(seconds=50), eta_low=now + timedelta(seconds=20), eta_high=now + timedelta(minutes=3),
        expected_duration=60.0,
    )  # fmt: skip
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.clock.install()

    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    assert "Running longer than usual" in page.locator(".overdue").inner_text()
    eta = page.locator("dt:text-is('Predicted finish (median)') + dd")
    assert re.search(r"\(in \d+ s\)", eta.inner_text())
    page.clock.fast_forward("01:30")
    page.wait_for_function("() => document.querySelector('time[data-not-past]').textContent === 'any moment now'")

    assert "ago" not in eta.inner_text()
    assert not violations.seen, violations.seen
    context.close()
