"""Accessibility in real headless Chromium against daphne: the portal's pages, the dashboard and the
admin's own templates pass axe-core's WCAG 2.1 A and AA rules (tests/axe.py), and the org editor, the
levers and the queue work from the keyboard alone."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartState
from common.actors import Actor
from orgs.models import Org
from orgs.services import org_hold
from tests.axe import wcag_violations
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ProviderFactory, charts_with_bands

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

OPS = Actor("staff:ops", staff=True)


def _charts(tenants: Tenants) -> Any:
    now = timezone.now()
    # On track, at risk, and late (the portal's words and the dashboard's panel are checked too).
    return charts_with_bands(
        tenants.org_a,
        tenants.workflow,
        each=lambda minutes: {
            "due_at": now + timedelta(minutes=30 if minutes < 12 else -5),
            "late_chance": 0.9 if minutes == 6 else 0.1,
        },
    )[-1]


def _page(chromium: Any, live_url: str, user: Any) -> Any:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.add_cookies([session_cookie(user, live_url)])
    return context.new_page()


def test_the_portal_passes_wcag_21_aa(live_url: str, chromium: Any, tenants: Tenants) -> None:
    chart = _charts(tenants)
    org_hold(org=tenants.org_a, actor=OPS, reason="invoice overdue")
    page = _page(chromium, live_url, tenants.member_a)
    for path in ("/portal/acme/", f"/portal/acme/charts/{chart.pk}/"):
        page.goto(live_url + path)
        page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
        assert wcag_violations(page) == [], path
    page.screenshot(path="/tmp/f_axe_portal.png", full_page=True)


def test_the_dashboard_passes_wcag_21_aa(live_url: str, chromium: Any, tenants: Tenants) -> None:
    _charts(tenants)
    page = _page(chromium, live_url, tenants.staff)
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    assert wcag_violations(page) == []
    page.screenshot(path="/tmp/f_axe_dashboard.png", full_page=True)


def test_the_admins_own_templates_pass_wcag_21_aa(live_url: str, chromium: Any, tenants: Tenants) -> None:
    org_hold(org=tenants.org_a, actor=OPS, reason="invoice overdue")
    ProviderFactory(slug="llm")
    page = _page(chromium, live_url, tenants.staff)
    for path in ("/admin/orgs/org/", f"/admin/orgs/org/{tenants.org_a.pk}/change/"):
        page.goto(live_url + path)
        assert wcag_violations(page) == [], path
    # The pages with autocompletes (Django's select2), their inline rows added and a pick opened.
    for path in ("/admin/orgs/providerpause/add/", f"/admin/orgs/org/{tenants.org_a.pk}/change/"):
        page.goto(live_url + path)
        for add in page.locator(".add-row a:visible").all():
            add.click()
        assert page.locator(".select2-selection").count() > 0, path
        assert wcag_violations(page) == [], path
        page.locator(".select2-selection").first.click()
        page.wait_for_selector(".select2-search__field")
        page.wait_for_selector(".select2-results__option[role=option]")  # the picks, once searched
        seen = wcag_violations(page)
        assert seen == [], "\n".join([path + " (a pick open)", *seen])
        # A search that finds nothing: select2 says so in an item of the list (role=alert inside a
        # listbox, which axe refuses).
        page.fill(".select2-container--open .select2-search__field", "no such thing at all")
        page.wait_for_selector(".select2-results__message")
        seen = wcag_violations(page)
        assert seen == [], "\n".join([path + " (nothing found)", *seen])
    page.screenshot(path="/tmp/f_axe_admin.png", full_page=True)


def _focused(page: Any) -> str:
    """The focused element as 'tag#id[name]' (or its data-act), for the keyboard tests."""
    return str(
        page.evaluate(
            "() => { const e = document.activeElement; return e.tagName.toLowerCase() + '#' + (e.id || '')"
            " + '[' + (e.getAttribute('name') || e.dataset.act || e.dataset.edit || '') + ']'; }"
        )
    )


def _until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the lever did not land"
        time.sleep(0.05)


def test_the_org_editor_the_levers_and_the_queue_work_from_the_keyboard(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 6)
    page = _page(chromium, live_url, tenants.staff)
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    page.wait_for_selector('tr[data-org="beta"] [data-edit]', timeout=10_000)

    # The org editor: Enter on the org's name opens it with the weight focused; Enter sets; Escape
    # closes it and gives the focus back to the org's name.
    page.focus('tr[data-org="beta"] [data-edit]')
    page.keyboard.press("Enter")
    page.wait_for_selector("#org-editor:not([hidden])")
    assert _focused(page) == "input#[weight]"
    page.keyboard.press("Control+A")
    page.keyboard.type("3")
    page.keyboard.press("Enter")
    _until(lambda: Org.objects.get(slug="beta").weight == 3)
    page.keyboard.press("Escape")
    page.wait_for_selector("#org-editor", state="hidden")
    assert page.evaluate("() => document.activeElement.closest('tr[data-org]').dataset.org") == "beta"

    # The queue: Tab from its scroller reaches the first row's levers; Enter pulls one.
    page.wait_for_selector(".vt-row[data-chart] [data-act=pause]", timeout=10_000)
    page.focus("#queue-scroll")
    page.keyboard.press("Tab")
    assert _focused(page) == "button#[priority]"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert _focused(page) == "button#[pause]"
    first = int(page.evaluate("() => document.activeElement.closest('.vt-row').dataset.chart"))
    page.keyboard.press("Enter")
    _until(lambda: Chart.objects.get(pk=first).state == ChartState.PAUSED)
    assert first in {chart.pk for chart in charts}
    page.screenshot(path="/tmp/f_keyboard_dashboard.png", full_page=True)
