"""The portal's chart page is live as the org page is: in real headless Chromium against daphne, a
chart started by a pass elsewhere and a hold placed on its org appear without a reload; what was typed
into a lever's reason survives the swap; and a page whose plan is older than three replans says so and
stops ticking."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from charts.models import ChartState
from charts.states import transition
from common.actors import DISPATCHER, Actor
from common.events import pass_done
from knobs.models import SchedulerConfig
from orgs.services import org_hold
from scheduling.models import QueueSample
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

OPS = Actor("staff:ops", staff=True)


def elsewhere(work: Callable[[], object]) -> None:
    """Run `work` in another thread (the test's thread runs Playwright's loop: tests/browser.py)."""

    def run() -> None:
        try:
            work()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def sample(at: Any) -> None:
    QueueSample.objects.create(at=at, queued=1, running=0, budget=10, cost_in_use=0)


def test_the_chart_page_follows_a_pass_and_a_hold(live_url: str, chromium: Any, tenants: Tenants) -> None:
    sample(timezone.now())
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="live-chart-1")
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
    assert page.locator("dd .state").inner_text() == "Queued"
    page.fill("#cancel-reason", "half typed")

    def start() -> None:
        transition(chart, ChartState.DISPATCHING, actor=DISPATCHER)
        transition(chart, ChartState.RUNNING, actor=DISPATCHER)
        sample(timezone.now())
        pass_done(kind="dispatch")

    elsewhere(start)
    # While the reason has focus the part waits (a swap would move the field from under the typing);
    # once focus leaves, the part is swapped, and what was typed is carried over.
    page.wait_for_timeout(2000)
    assert page.locator("dd .state").inner_text() == "Queued"
    page.locator("#cancel-reason").blur()
    page.wait_for_selector("dd .state:text-is('Running')", timeout=10_000)
    assert page.input_value("#cancel-reason") == "half typed"
    page.screenshot(path="/tmp/f_live_chart_running.png", full_page=True)

    elsewhere(lambda: org_hold(org=tenants.org_a, actor=OPS, reason="invoice overdue"))
    page.wait_for_selector(".held:has-text('invoice overdue')", timeout=10_000)
    assert page.locator(".stale").is_hidden()
    page.screenshot(path="/tmp/f_live_chart_held.png", full_page=True)
    assert not violations.seen, violations.seen


def test_a_stale_plan_is_said_and_the_times_stop_ticking(live_url: str, chromium: Any, tenants: Tenants) -> None:
    SchedulerConfig.objects.update_or_create(id=1, defaults={"replan_interval": 1.0})
    planned_at = timezone.now() - timedelta(seconds=1)
    sample(planned_at)
    ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, external_id="old-1", eta=planned_at + timedelta(minutes=5)
    )
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    page.goto(f"{live_url}/portal/acme/")
    assert page.locator(".stale").is_hidden()  # 1 s old: fresh

    # Three replan intervals (3 s) after the plan, with no replan since: the page says so, and stops ticking.
    page.wait_for_selector(".stale:has-text('Not updated since')", timeout=10_000)
    assert page.locator("#live[data-stale]").count() == 1
    page.screenshot(path="/tmp/f_live_stale.png", full_page=True)

    # A replan brings it back.
    def replanned() -> None:
        sample(timezone.now())
        pass_done(kind="plan")

    elsewhere(replanned)
    page.wait_for_selector(".stale", state="hidden", timeout=10_000)
    assert page.locator("#live[data-stale]").count() == 0
