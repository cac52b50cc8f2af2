"""The queue's rows say why each chart waits, with the detail in a tooltip (real Chromium)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.models import ChartPlan, ChartState
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.dashboard.live import CHROMIUM, session_cookie

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_each_queue_row_shows_its_reason_and_the_tooltip_its_detail(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 4)
    until = timezone.now() + timedelta(minutes=5)
    reasons = [("", None, None), ("budget", until, None), ("budget", until, charts[1].pk), ("turn", until, None)]
    for chart, (reason, at, head) in zip(charts, reasons, strict=True):
        ChartPlan.objects.filter(chart=chart).update(waiting_reason=reason, waiting_until=at, head_of_line=head)
    charts[3].state, charts[3].attempt = ChartState.RETRY_WAIT, 1
    charts[3].save(update_fields=["state", "attempt"])
    ChartPlan.objects.filter(chart=charts[3]).update(waiting_reason="backoff")

    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("#queue-rows .vt-row[data-chart] .badge.reason", timeout=10_000)

    badges = page.locator("#queue-rows .vt-row[data-chart] .badge.reason")
    # In words (the reason's label), with the whole text and its detail in the title.
    words = ["starting now", "Waiting for capacity", "Waiting for capacity", "Retrying after a failure"]
    assert badges.all_text_contents() == words
    titles = [badges.nth(i).get_attribute("title") for i in range(4)]
    assert titles[0] == "starting now · queued: the last replan starts it now"
    assert titles[1].startswith("Waiting for capacity · queued: heads the line: waits for budget to free; until ")  # type: ignore[union-attr]
    assert f"waits behind chart {charts[1].pk} at the head of the line" in titles[2]  # type: ignore[operator]
    assert titles[3].startswith("Retrying after a failure · retry_wait: retry backoff after attempt 1")  # type: ignore[union-attr]
    context.close()


@pytest.mark.parametrize("width", [1200, 1280, 1500, 1920])
def test_a_queue_row_shows_its_eta_band_and_levers_whole_at_an_operators_width(
    live_url: str, chromium: Any, tenants: Tenants, width: int
) -> None:
    """On `make run` at 1500 px the ETA column cut every band to "in 10s (in …": the likely range was
    readable only in the tooltip; at 1280 px the row was wider than its panel, the levers cut off."""
    charts = plan_queue([tenants.org_a], tenants.workflow, 2)
    now = timezone.now()
    ChartPlan.objects.filter(chart=charts[0]).update(
        eta=now + timedelta(minutes=1, seconds=3),
        eta_low=now + timedelta(seconds=44),
        eta_high=now + timedelta(minutes=12, seconds=33),
    )

    context = chromium.new_context(viewport={"width": width, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    page.goto(live_url + "/dashboard/")
    cell = f'#queue-rows .vt-row[data-chart="{charts[0].pk}"] > span:nth-child(8)'
    page.wait_for_selector(f"{cell} .band", timeout=10_000)

    assert page.locator(cell).inner_text().startswith("in 1m0"), page.locator(cell).inner_text()
    cut = page.eval_on_selector(cell, "cell => cell.scrollWidth - cell.clientWidth")
    assert cut <= 0, f"the ETA cell is cut by {cut} px: {page.locator(cell).inner_text()!r}"
    wider = page.eval_on_selector("#queue-scroll", "scroller => scroller.scrollWidth - scroller.clientWidth")
    assert wider <= 0, f"the queue's rows are {wider} px wider than their panel"
    context.close()
