"""The at-risk panel in real headless Chromium: the charts that will miss their due time or have,
earliest due first with their chance in %, the counts per org, and a replan's hint brings in a chart
that became at risk."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.models import ChartPlan, ChartState
from common import events
from tests.browser import open_dashboard
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM
from tests.factories import ChartFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
HOUR = timedelta(hours=1)


def per_org(page: Any) -> list[list[str]]:
    """The per-org counts, cell by cell. Not innerText, whose tabs between cells depend on the row
    having a layout box at the instant it is read (a CI run once read 'acme10')."""
    return page.eval_on_selector_all(
        ".at-risk-orgs tbody tr", "(rows) => rows.map((tr) => [...tr.cells].map((td) => td.textContent.trim()))"
    )


def test_the_panel_lists_them_by_due_time_and_follows_the_plan(live_url: str, chromium: Any, tenants: Tenants) -> None:
    now = timezone.now()

    def chart(org: Any, name: str, **fields: Any) -> Any:
        return ChartFactory(org=org, workflow=tenants.workflow, external_id=name, **fields)

    chart(tenants.org_a, "a-risky", due_at=now + 2 * HOUR, eta=now + 3 * HOUR, late_chance=0.7, position=0)
    chart(tenants.org_b, "b-late", state=ChartState.RUNNING, due_at=now - HOUR, late_chance=1.0, position=1)
    soon = chart(tenants.org_b, "b-soon", due_at=now + HOUR, eta=now + HOUR / 2, late_chance=0.1, position=2)

    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)

    rows = page.locator("#at-risk-rows tr")
    assert rows.count() == 2
    first, second = rows.nth(0).inner_text(), rows.nth(1).inner_text()
    assert "b-late" in first
    assert "late" in first
    assert "100%" in first
    assert "a-risky" in second
    assert "70%" in second
    assert "at risk" in second
    # The due time in the viewer's clock (the page rewrites the server's UTC), and relative.
    due = rows.nth(1).locator("time[datetime]")
    assert due.get_attribute("data-local") == "1"
    assert "in " in rows.nth(1).locator("td").nth(2).inner_text()
    assert per_org(page) == [["acme", "1", "0"], ["beta", "0", "1"]]

    # A replan finds b-soon at risk now: its hint brings it in, first by due time among those at risk.
    ChartPlan.objects.filter(chart=soon).update(late_chance=0.8)
    events.broadcast(events.STAFF_GROUP, {"kind": "plan"})
    page.wait_for_function("() => document.querySelectorAll('#at-risk-rows tr').length === 3", timeout=10_000)
    assert "b-soon" in rows.nth(1).inner_text()
    assert "80%" in rows.nth(1).inner_text()
    assert page.locator("#at-risk-total").inner_text() == "2"
    assert per_org(page) == [["acme", "1", "0"], ["beta", "1", "1"]]
    assert not violations.seen, violations.seen
    context.close()
