"""The dashboard in real headless Chromium against a live daphne with the Redis channel layer."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from charts.models import Chart
from fairsched.devservices import free_port, start_redis
from orgs import services as org_services
from orgs.models import Org, ProviderPause
from scheduling.models import SchedulerConfig
from tests.browser import database_url
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.dashboard.live import CHROMIUM, daphne, session_cookie
from tests.factories import ProviderFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
# Playwright's sync API drives its own event loop on this thread; the ORM calls between its calls
# are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _open(chromium: Any, base_url: str, user: Any) -> Any:
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(user, base_url)])
    page = context.new_page()
    page.goto(base_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    return page


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_lever_pulled_in_one_browser_shows_in_another(live_url: str, chromium: Any, tenants: Tenants) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 50)
    operator = _open(chromium, live_url, tenants.staff)
    watcher = _open(chromium, live_url, tenants.staff)
    hold_seen = watcher.locator('tr[data-org="acme"] [data-hold]')
    assert hold_seen.text_content() == "Hold"

    started = time.monotonic()
    operator.locator('tr[data-org="acme"] [data-hold]').click()
    watcher.wait_for_function(
        "() => document.querySelector('tr[data-org=\"acme\"] [data-hold]').textContent === 'Release'", timeout=3000
    )
    lag = time.monotonic() - started
    assert lag < 2.0
    assert Org.objects.get(slug="acme").weight == 0
    _shot(watcher, "dashboard-after-hold")

    operator.fill('tr[data-org="beta"] input[name=weight]', "-3")
    operator.locator('tr[data-org="beta"] form[data-lever=weight] button[type=submit]').click()
    operator.wait_for_selector('tr[data-org="beta"] [data-err]:has-text("weight must be")', timeout=3000)
    assert Org.objects.get(slug="beta").weight == 1
    _shot(operator, "dashboard-bad-value")


def test_ten_thousand_queued_charts_load_and_scroll(live_url: str, chromium: Any, tenants: Tenants) -> None:
    count = 12_000
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, count)
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    started = time.monotonic()
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("#queue-rows .vt-row[data-chart]")
    first_paint = time.monotonic() - started
    assert first_paint < 2.0
    assert page.locator("#queue-total").text_content() == f"{count:,}"
    assert page.locator("#queue-rows .vt-row[data-chart] .pos").first.text_content() == "0"
    # Only the visible rows are in the DOM, whatever the queue's length.
    assert page.locator("#queue-rows .vt-row").count() < 60

    page.evaluate("() => { const s = document.querySelector('#queue-scroll'); s.scrollTop = s.scrollHeight; }")
    page.wait_for_selector(f"#queue-rows .vt-row[data-chart] .pos:text-is('{count - 1}')", timeout=5000)
    page.fill("#queue-jump", "5000")
    page.press("#queue-jump", "Enter")
    page.wait_for_selector("#queue-rows .vt-row[data-chart] .pos:text-is('5000')", timeout=5000)
    _shot(page, "dashboard-12k-queue")
    page.select_option("#queue-org", "beta")
    page.wait_for_function("() => document.querySelector('#queue-total').textContent === '6,000'", timeout=5000)
    orgs = page.locator("#queue-rows .vt-row[data-chart] span:nth-child(3)").all_text_contents()
    assert orgs
    assert set(orgs) == {"beta"}
    context.close()


def test_the_page_reconnects_and_resyncs_after_a_server_restart(
    django_db_setup: None, chromium: Any, tenants: Tenants
) -> None:
    port = free_port()
    env = {"DATABASE_URL": database_url()}
    context = chromium.new_context()
    with daphne(env, port=port) as url:
        context.add_cookies([session_cookie(tenants.staff, url)])
        page = context.new_page()
        page.goto(url + "/dashboard/")
        page.wait_for_selector("body[data-live=live]", timeout=10_000)
    page.wait_for_selector("body[data-live=reconnecting]", timeout=5000)
    # Changed while no server could tell the page: only the resync after the reconnect shows it.
    org_services.org_hold(org=tenants.org_b, actor="user:test")
    with daphne(env, port=port):
        page.wait_for_selector("body[data-live=live]", timeout=20_000)
        page.wait_for_function(
            "() => document.querySelector('tr[data-org=\"beta\"] [data-hold]').textContent === 'Release'",
            timeout=5000,
        )
        _shot(page, "dashboard-after-reconnect")
    context.close()


def test_queue_row_levers_and_the_what_if_preview(live_url: str, chromium: Any, tenants: Tenants) -> None:
    from scheduling.replan import plan_refresh

    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 30)
    plan_refresh()
    ProviderFactory(slug="openai", name="OpenAI")
    page = _open(chromium, live_url, tenants.staff)
    first = page.locator("#queue-rows .vt-row[data-chart]").first
    chart_id = int(first.get_attribute("data-chart") or 0)
    first.locator("button[data-act=priority]").click()
    page.wait_for_function(
        f"() => !!document.querySelector('#queue-rows .vt-row[data-chart=\"{chart_id}\"] .badge.hp')", timeout=5000
    )
    assert Chart.objects.get(pk=chart_id).high_priority

    page.fill("#form-budget [name=budget]", "40")
    page.click("#form-budget [data-preview]")
    page.wait_for_selector("#whatif-result:not([hidden]) tbody tr", timeout=5000)
    assert "budget → 40" in (page.text_content("#whatif-changes") or "")
    rows = page.locator("#whatif-result tbody tr")
    assert rows.count() == 3  # all, acme, beta
    assert rows.nth(0).locator(".earlier").count() == 1  # a bigger budget clears everything sooner
    _shot(page, "dashboard-what-if")
    page.click("#whatif-apply")
    page.wait_for_function("() => document.querySelector('#whatif-changes').children.length === 0", timeout=5000)
    assert SchedulerConfig.load().budget == 40

    page.select_option("#form-whatif [name=kind]", "hold")
    page.select_option("#form-whatif [name=org]", "beta")
    page.click("#form-whatif button[type=submit]")
    page.click("#whatif-preview")
    page.wait_for_selector("#whatif-result:not([hidden]) tbody tr :text('no longer clears')", timeout=5000)
    # The charts that move most: beta's 15 lose their ETA (the budget of 40 runs acme's at once already).
    page.wait_for_selector("#whatif-moves:not([hidden]) tbody tr :text('no ETA')", timeout=5000)
    assert "15 no ETA" in (page.text_content("#whatif-result") or "")
    held_chart = int(page.locator("#whatif-moves tbody tr").first.get_attribute("data-chart") or 0)
    assert Chart.objects.get(pk=held_chart).org.slug == "beta"
    page.click("#whatif-clear")
    assert page.locator("#whatif-moves").is_hidden()
    assert not Org.objects.get(slug="beta").is_held

    page.select_option("#form-provider [name=org]", "beta")
    page.fill("#form-provider [name=reason]", "429s")
    page.click("#form-provider button[type=submit]")
    page.wait_for_selector("#provider-list :text('paused for beta')", timeout=5000)
    pause = ProviderPause.objects.get()
    assert (pause.org, pause.reason, pause.created_by) == (tenants.org_b, "429s", "user:stella")
    page.click("#provider-list [data-resume]")
    page.wait_for_selector("#provider-list :text('running')", timeout=5000)


def test_the_page_reconnects_and_resyncs_after_a_redis_blip(
    django_db_setup: None, chromium: Any, tenants: Tenants, tmp_path: Path
) -> None:
    redis_port = free_port()
    redis = start_redis(tmp_path, port=redis_port)
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {"DATABASE_URL": database_url(), "REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url}
    try:
        with daphne(env) as url:
            context = chromium.new_context()
            context.add_cookies([session_cookie(tenants.staff, url)])
            page = context.new_page()
            page.goto(url + "/dashboard/")
            page.wait_for_selector("body[data-live=live]", timeout=10_000)
            redis.stop()
            page.wait_for_selector("body[data-live=reconnecting]", timeout=10_000)
            # Changed while the channel layer was down: only the resync after the reconnect shows it.
            org_services.org_hold(org=tenants.org_b, actor="user:test")
            redis = start_redis(tmp_path, port=redis_port)
            page.wait_for_selector("body[data-live=live]", timeout=20_000)
            page.wait_for_function(
                "() => document.querySelector('tr[data-org=\"beta\"] [data-hold]').textContent === 'Release'",
                timeout=5000,
            )
            # The new Redis knows no groups: the reconnect joined again, so hints flow once more.
            other = context.new_page()
            other.goto(url + "/dashboard/")
            other.wait_for_selector("body[data-live=live]", timeout=10_000)
            other.locator('tr[data-org="beta"] [data-hold]').click()
            page.wait_for_function(
                "() => document.querySelector('tr[data-org=\"beta\"] [data-hold]').textContent === 'Hold'",
                timeout=3000,
            )
            _shot(page, "dashboard-after-redis-blip")
            context.close()
    finally:
        redis.stop()
