"""The dashboard's Events panel and plots in real headless Chromium against daphne: a bulk submission is
one event line with its count; each plot (the projected plan, queue depth, budget use) has a text
alternative with the numbers it shows, kept current; a plot's legend has a band of its own above the data."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from scheduling import selectors
from scheduling.models import QueueSample
from tests.browser import open_dashboard
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _bulk(tenants: Tenants, count: int, prefix: str = "bulk") -> None:
    items = [ChartRequest(workflow=tenants.workflow.name, external_id=f"{prefix}-{i:03d}") for i in range(count)]
    chart_submit_bulk(org=tenants.org_a, items=items, actor=Actor("user:stella", staff=True))


def test_a_bulk_is_one_event_with_its_count(tenants: Tenants) -> None:
    _bulk(tenants, 100)
    _bulk(tenants, 1, prefix="one")  # a bulk of one reads as the chart it is; the first bulk's count stays whole

    events = [event for event in selectors.recent_events(limit=50) if event["kind"] == "chart"]

    assert [(event["count"], event["text"]) for event in events] == [
        (1, "one-000: new → queued"),
        (100, "100 charts (bulk-000 … bulk-099): new → queued"),
    ]


def test_the_events_panel_and_the_plots_say_their_numbers(live_url: str, chromium: Any, tenants: Tenants) -> None:
    _bulk(tenants, 100)
    now = timezone.now()
    for minutes, queued in ((10, 40), (5, 120), (0, 100)):
        QueueSample.objects.create(
            at=now - timedelta(minutes=minutes), queued=queued, running=minutes, budget=8, cost_in_use=8 - minutes // 5
        )
    tenants.org_a.clear_at = now + timedelta(minutes=30)
    tenants.org_a.save()
    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)

    page.wait_for_selector("#events li[data-count='100']", timeout=10_000)
    lines = page.locator("#events li.k-chart")
    assert lines.count() == 1
    assert "100 charts (bulk-000 … bulk-099): new → queued" in lines.first.inner_text()

    depth = page.locator("#plot-depth").get_attribute("aria-label") or ""
    assert depth.startswith("Queued and running charts over time, ")
    assert "queued 100 now (lowest 40, highest 120); running 0 now (lowest 0, highest 10)." in depth
    budget = page.locator("#plot-budget").get_attribute("aria-label") or ""
    assert "budget 8 now (lowest 8, highest 8)" in budget
    assert "cost in use 8 now (lowest 6, highest 8)" in budget
    page.wait_for_selector("#plot-timeline[aria-label*='acme clears']", timeout=10_000)
    timeline = page.locator("#plot-timeline").get_attribute("aria-label") or ""
    assert re.search(r"acme clears \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", timeline), timeline

    # The legend sits above the plot area: no line or area point is drawn as high as it.
    bottom = "svg => Math.max(...[...svg.querySelectorAll('.legend')].map((e) => e.getBBox().y + e.getBBox().height))"
    for plot in ("#plot-depth", "#plot-budget"):
        legend_bottom = page.eval_on_selector(plot, bottom)
        data_top = page.eval_on_selector(
            plot, "svg => Math.min(...[...svg.querySelectorAll('polyline, path')].map((e) => e.getBBox().y))"
        )
        assert legend_bottom <= data_top, plot
    page.locator(".plots").screenshot(path="/tmp/f_words_plots.png")
    page.locator("#events").screenshot(path="/tmp/f_words_events.png")
    context.close()
    assert violations.seen == []
