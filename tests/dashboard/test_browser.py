"""The dashboard in real headless Chromium against a live daphne with the Redis channel layer.

Every lever the page offers is pulled from the page: it calls /api/v1/ with the staff session and
its CSRF token, the change lands, and a bad value shows the API's 400 (naming the field) beside the
control, with nothing written."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartState
from common.actors import Actor
from fairsched.devservices import free_port, start_redis
from knobs.models import SchedulerConfig
from orgs import services as org_services
from orgs.models import Org, ProviderPause, WorkflowCost
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.dashboard.live import CHROMIUM, daphne, session_cookie
from tests.database import database_url
from tests.factories import ProviderFactory
from tests.processes import service

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
    refreshes: list[str] = []
    watcher.on("request", lambda request: refreshes.append(request.url) if "/partials/" in request.url else None)

    operator.locator('tr[data-org="acme"] [data-hold]').click()
    watcher.wait_for_function(
        "() => document.querySelector('tr[data-org=\"acme\"] [data-hold]')?.textContent === 'Release'", timeout=3000
    )
    # The hint named one org: the watcher asked for that org's row (and what a hold moves outside the
    # plan, and the events), not the whole table, and not the header, which an org lever cannot move.
    assert refreshes == [f"{live_url}/dashboard/partials/?names=outside,events,orgs&org={tenants.org_a.pk}"]
    assert Org.objects.get(slug="acme").weight == 0
    _shot(watcher, "dashboard-after-hold")

    operator.click('tr[data-org="beta"] [data-edit]')
    operator.fill("#org-editor [name=weight]", "-3")
    operator.press("#org-editor [name=weight]", "Enter")
    operator.wait_for_selector('#org-editor form:has([name=weight]) [data-err]:has-text("weight:")', timeout=3000)
    assert Org.objects.get(slug="beta").weight == 1
    _shot(operator, "dashboard-bad-value")


def test_the_org_editor_opens_from_the_keyboard_and_follows_its_row(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    """One editor for the org picked in the table: opened with the keyboard on the org's name, it shows
    the row's values, follows them when another operator changes the org (the hint swaps the row in)
    except for what this operator has typed, and Escape closes it, back to the row."""
    org_services.org_cap_set(org=tenants.org_a, max_concurrency=5, actor=Actor("user:test", staff=True))
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=4)
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    acme = 'tr[data-org="acme"]'
    page.focus(f"{acme} [data-edit]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#org-editor:not([hidden])", timeout=3000)
    assert page.evaluate("() => document.activeElement.name") == "weight"
    assert page.locator(f"{acme}[aria-current=true]").count() == 1
    values = {
        name: page.input_value(f"#org-editor [name={name}]")
        for name in ("weight", "max_concurrency", "queue_limit", "cost")
    }
    assert values == {"weight": "2", "max_concurrency": "5", "queue_limit": "", "cost": "4"}

    page.fill("#org-editor [name=queue_limit]", "77")  # typed, not sent
    other = _open(chromium, live_url, tenants.staff)
    other.click(f"{acme} [data-edit]")
    _set(other, "#org-editor form:has([name=weight])", {"weight": "6"})
    page.wait_for_selector(f'{acme}[data-weight="6"]', timeout=5000)
    page.wait_for_function("() => document.querySelector('#org-editor [name=weight]').value === '6'", timeout=3000)
    assert page.input_value("#org-editor [name=queue_limit]") == "77"
    assert page.locator(f"{acme}[aria-current=true]").count() == 1  # the swapped-in row is still the one picked

    page.keyboard.press("Escape")
    assert page.locator("#org-editor").is_hidden()
    assert page.evaluate("() => document.activeElement.closest('tr').dataset.org") == "acme"
    assert violations.seen == []


def test_hints_that_come_during_a_refresh_wait_for_it_and_none_is_lost(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    """One partials request at a time: what hints move while one is on its way goes in the next, all of
    it (htmx queued a second request of the page and kept only the last queued, so a row asked for
    before a config change was never refreshed)."""
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    page.wait_for_selector('tr[data-org="beta"]')
    held: list[Any] = []  # the first partials request, held until continued; the others go through
    page.route("**/dashboard/partials/**", lambda route: route.continue_() if held else held.append(route))
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/partials/" in request.url else None)
    call = """async ([method, url, body]) => {
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const headers = {"Content-Type": "application/json", "X-CSRFToken": csrf};
        return (await fetch(url, {method, headers, body: JSON.stringify(body)})).status;
    }"""
    assert page.evaluate(call, ["POST", "/api/v1/orgs/acme/hold/", {}]) == 200
    deadline = time.monotonic() + 5
    while not held:
        assert time.monotonic() < deadline, "the hint asked for no refresh"
        page.wait_for_timeout(50)
    # Two hints, far enough apart to be two refreshes (a page refreshes at most five times a second).
    assert page.evaluate(call, ["POST", "/api/v1/orgs/beta/hold/", {}]) == 200
    page.wait_for_timeout(400)
    assert page.evaluate(call, ["PATCH", "/api/v1/scheduler/config/", {"budget": 9}]) == 200
    page.wait_for_timeout(400)  # both hints have come: what they move waits for the request on its way
    assert len(asked) == 1
    held[0].continue_()
    page.wait_for_selector("tr[data-org=\"acme\"] [data-hold]:text-is('Release')", timeout=5000)
    page.wait_for_selector("tr[data-org=\"beta\"] [data-hold]:text-is('Release')", timeout=5000)
    page.wait_for_function("() => document.querySelector('#form-budget [name=budget]').value === '9'", timeout=5000)
    assert violations.seen == []


def test_what_is_typed_while_a_lever_call_is_on_its_way_is_not_taken_for_sent(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    """The call's success marks as sent only what it sent: a value typed again meanwhile stays the
    operator's, and the next swap keeps it (the success used to drop every control's typed mark, so
    the swap the call's own hint brought put the server's value over the one being typed)."""
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    held: list[Any] = []

    def hold_the_first_edit(route: Any) -> None:  # anything else (a read of the row's ETag) goes on
        if route.request.method == "PATCH" and not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/v1/scheduler/config/", hold_the_first_edit)
    _set(page, "#form-budget", {"budget": "9"})
    deadline = time.monotonic() + 5
    while not held:
        assert time.monotonic() < deadline, "the lever sent nothing"
        page.wait_for_timeout(50)
    page.fill("#form-budget [name=budget]", "12")  # typed again while the first call is on its way
    with page.expect_response(lambda response: "/dashboard/partials/" in response.url, timeout=5000):
        with page.expect_response(lambda response: response.request.method == "PATCH", timeout=5000) as edit:
            held[0].continue_()
        assert edit.value.status == 200, edit.value.text()
        page.wait_for_function(
            "() => !document.querySelector('#form-budget [name=budget]').dataset.dirty"
            " || document.querySelector('#form-budget').classList.contains('ok-flash')"
        )
        page.click("#summary")  # focus leaves: the region the hint moved is swapped now
    page.wait_for_timeout(100)
    assert SchedulerConfig.load().budget == 9
    assert page.input_value("#form-budget [name=budget]") == "12"
    assert violations.seen == []


def test_ten_thousand_queued_charts_load_and_scroll(live_url: str, chromium: Any, tenants: Tenants) -> None:
    count = 12_000
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, count)
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    page.goto(live_url + "/dashboard/")
    page.wait_for_selector("#queue-rows .vt-row[data-chart]")
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
    org_services.org_hold(org=tenants.org_b, actor=Actor("user:test", staff=True))
    with daphne(env, port=port):
        page.wait_for_selector("body[data-live=live]", timeout=20_000)
        page.wait_for_function(
            "() => document.querySelector('tr[data-org=\"beta\"] [data-hold]')?.textContent === 'Release'",
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
    page.click("#provider-list button[data-api]")
    page.wait_for_selector("#provider-list :text('running')", timeout=5000)
    assert not ProviderPause.objects.filter(until__gt=timezone.now()).exists()


def _lever_page(chromium: Any, base_url: str, user: Any) -> tuple[Any, Violations]:
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(user, base_url)])
    page = context.new_page()
    violations = Violations(page)
    page.on("dialog", lambda dialog: dialog.accept())  # the cancel lever asks first
    page.goto(base_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    return page, violations


def _set(page: Any, form: str, values: dict[str, str]) -> None:
    """Fill a lever's form and send it (Enter in its last control)."""
    for name, text in values.items():
        page.fill(f"{form} [name={name}]", text)
    page.press(f"{form} [name={list(values)[-1]}]", "Enter")


def _until(predicate: Any, timeout: float = 5.0) -> None:
    """Wait for the database to show what the page did (the page's own call commits it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the lever did not land"
        time.sleep(0.05)


def test_every_org_and_scheduler_lever_works_from_the_page(live_url: str, chromium: Any, tenants: Tenants) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 10)
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    beta = 'tr[data-org="beta"]'
    editor = "#org-editor"
    assert page.locator(editor).is_hidden()
    page.click(f"{beta} [data-edit]")
    assert page.text_content("#org-editor-slug") == "beta"
    assert page.input_value(f"{editor} [name=weight]") == "1"

    # Weight, cap and queue limit: PATCH /api/v1/orgs/beta/; the row shows the new value once swapped.
    for name, text, field in [
        ("weight", "4", "weight"),
        ("max_concurrency", "2", "max_concurrency"),
        ("queue_limit", "500", "queue_limit"),
    ]:
        _set(page, f"{editor} form:has([name={name}])", {name: text})
        _until(lambda field=field, text=text: getattr(Org.objects.get(slug="beta"), field) == int(text))
    page.wait_for_selector(f'{beta}[data-weight="4"][data-cap="2"][data-limit="500"]', timeout=5000)
    # Empty means none: the cap goes.
    _set(page, f"{editor} form:has([name=max_concurrency])", {"max_concurrency": ""})
    _until(lambda: Org.objects.get(slug="beta").max_concurrency is None)

    # Bad values: the API's 400 names the field beside the control, nothing is written.
    for name, text, needle in [
        ("weight", "-3", "weight:"),
        ("max_concurrency", "0", "max_concurrency:"),
        ("queue_limit", "lots", "queue_limit:"),
    ]:
        _set(page, f"{editor} form:has([name={name}])", {name: text})
        page.wait_for_selector(f'{editor} form:has([name={name}]) [data-err]:has-text("{needle}")', timeout=5000)
    org = Org.objects.get(slug="beta")
    assert (org.weight, org.max_concurrency, org.queue_limit) == (4, None, 500)

    # Hold and release: the button flips when the hint swaps the org's row in.
    page.click(f"{beta} [data-hold]")
    page.wait_for_selector(f"{beta} [data-hold]:text-is('Release')", timeout=5000)
    assert Org.objects.get(slug="beta").is_held
    page.click(f"{beta} [data-hold]")
    page.wait_for_selector(f"{beta} [data-hold]:text-is('Hold')", timeout=5000)
    assert Org.objects.get(slug="beta").weight == 4

    # Cost per workflow: PUT, then empty (back to the default): DELETE; a bad one names cost.
    _set(page, f"{editor} form.costs", {"cost": "3"})
    page.wait_for_selector(f"{beta} .tag:text-is('render=3')", timeout=5000)
    assert WorkflowCost.objects.get(org=tenants.org_b).cost == 3
    _set(page, f"{editor} form.costs", {"cost": "0"})
    page.wait_for_selector(f'{editor} form.costs [data-err]:has-text("cost:")', timeout=5000)
    _set(page, f"{editor} form.costs", {"cost": ""})
    _until(lambda: not WorkflowCost.objects.filter(org=tenants.org_b).exists())

    # The scheduler: budget, policy with quantum, aging (PATCH /api/v1/scheduler/config/).
    _set(page, "#form-budget", {"budget": "9"})
    _until(lambda: SchedulerConfig.load().budget == 9)
    _set(page, "#form-budget", {"budget": "0"})
    page.wait_for_selector('#form-budget [data-err]:has-text("budget:")', timeout=5000)
    page.select_option("#form-policy [name=policy]", "deficit")
    _set(page, "#form-policy", {"quantum": "2.5"})
    _until(lambda: (SchedulerConfig.load().policy, SchedulerConfig.load().quantum) == ("deficit", 2.5))
    _set(page, "#form-policy", {"quantum": "fast"})
    page.wait_for_selector('#form-policy [data-err]:has-text("quantum:")', timeout=5000)
    _set(page, "#form-aging", {"aging_step": "30", "aging_cap": "4"})
    _until(lambda: (SchedulerConfig.load().aging_step, SchedulerConfig.load().aging_cap) == (30.0, 4))
    _set(page, "#form-aging", {"aging_step": "", "aging_cap": "-1"})
    page.wait_for_selector('#form-aging [data-err]:has-text("aging_cap:")', timeout=5000)
    config = SchedulerConfig.load()
    assert (config.budget, config.quantum, config.aging_step, config.aging_cap) == (9, 2.5, 30.0, 4)
    _shot(page, "dashboard-levers")
    assert violations.seen == []


def test_every_chart_and_provider_lever_works_from_the_page(live_url: str, chromium: Any, tenants: Tenants) -> None:
    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 6)
    running = charts[-1]
    Chart.objects.filter(pk=running.pk).update(state=ChartState.RUNNING, started_at=timezone.now())
    ProviderFactory(slug="openai", name="OpenAI")
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    row = f'#queue-rows .vt-row[data-chart="{charts[1].pk}"]'

    page.click(f"{row} button[data-act=top]")
    _until(lambda: Chart.objects.get(pk=charts[1].pk).priority > 0)
    page.click(f"{row} button[data-act=priority]")
    _until(lambda: Chart.objects.get(pk=charts[1].pk).high_priority)
    page.click(f"{row} button[data-act=pause]")
    _until(lambda: Chart.objects.get(pk=charts[1].pk).state == ChartState.PAUSED)
    # The paused chart shows outside the plan, where it resumes.
    page.click("#outside summary")
    outside = f'#outside-rows tr[data-chart="{charts[1].pk}"] button[data-act=resume]'
    page.wait_for_selector(outside, timeout=5000)
    page.click(outside)
    _until(lambda: Chart.objects.get(pk=charts[1].pk).state == ChartState.QUEUED)
    # Cancel from the queue and from in flight.
    page.click(f'#queue-rows .vt-row[data-chart="{charts[2].pk}"] button[data-act=cancel]')
    _until(lambda: Chart.objects.get(pk=charts[2].pk).state == ChartState.CANCELLED)
    page.click(f'#inflight-rows tr[data-chart="{running.pk}"] button[data-act=cancel]')
    _until(lambda: Chart.objects.get(pk=running.pk).state == ChartState.CANCELLED)
    # The hint swaps the in-flight table: the cancelled chart has left it.
    page.wait_for_selector(f'#inflight-rows tr[data-chart="{running.pk}"]', state="detached", timeout=5000)

    # Providers: pause for one org (POST /api/v1/provider-pauses/), resume by slug.
    page.select_option("#form-provider [name=org]", "beta")
    page.fill("#form-provider [name=reason]", "429s")
    page.click("#form-provider button[type=submit]")
    page.wait_for_selector("#provider-list :text('paused for beta')", timeout=5000)
    pause = ProviderPause.objects.get()
    assert (pause.org, pause.reason) == (tenants.org_b, "429s")
    page.fill("#form-provider [name=until]", "")
    page.click("#form-provider button[type=submit]")
    page.wait_for_selector('#form-provider [data-err]:has-text("until:")', timeout=5000)
    assert ProviderPause.objects.count() == 1
    page.click("#provider-list button[data-api]")
    page.wait_for_selector("#provider-list :text('running')", timeout=5000)
    assert not ProviderPause.objects.filter(until__gt=timezone.now()).exists()
    assert violations.seen == []


def test_the_what_if_panel_offers_every_lever(live_url: str, chromium: Any, tenants: Tenants) -> None:
    from scheduling.replan import plan_refresh

    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 12)
    plan_refresh()
    ProviderFactory(slug="openai", name="OpenAI")
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    offered = page.eval_on_selector_all("#form-whatif [name=kind] option", "options => options.map(o => o.value)")
    assert set(offered) == {
        "weight",
        "hold",
        "release",
        "cap",
        "queue_limit",
        "cost",
        "budget",
        "policy",
        "quantum",
        "aging_step",
        "aging_cap",
        "priority",
        "high_priority",
        "provider_pause",
        "provider_resume",
    }

    def add(kind: str, **fields: str) -> None:
        page.select_option("#form-whatif [name=kind]", kind)
        for name, text in fields.items():
            if name in ("org", "workflow", "provider"):
                page.select_option(f"#form-whatif [name={name}]", text)
            else:
                page.fill(f"#form-whatif [name={name}]", text)
        page.click("#form-whatif button[type=submit]")

    add("weight", org="acme", value="3")
    add("cap", org="beta", value="1")
    add("queue_limit", org="acme", value="5")
    add("cost", org="acme", workflow="render", value="2")
    add("budget", value="4")
    add("policy", value="deficit")
    add("quantum", value="2")
    add("aging_step", value="60")
    add("aging_cap", value="3")
    add("priority", chart=str(charts[-1].pk), value="5")
    add("high_priority", chart=str(charts[-2].pk), value="true")
    add("provider_pause", provider="openai", org="beta", until="2099-01-01T00:00")
    add("provider_resume", provider="openai", org="")
    add("hold", org="beta")
    assert page.locator("#whatif-changes li").count() == 14
    page.click("#whatif-preview")
    page.wait_for_selector("#whatif-result:not([hidden]) tbody tr", timeout=10_000)
    assert page.text_content("#whatif-err") == ""
    assert SchedulerConfig.load().budget != 4  # a preview writes nothing

    # A bad value: the API's 400 names it in the panel.
    add("budget", value="0")
    page.click("#whatif-preview")
    page.wait_for_selector('#whatif-err:has-text("budget:")', timeout=5000)
    page.click("#whatif-clear")

    # Apply all goes through the real levers.
    add("budget", value="7")
    add("weight", org="acme", value="6")
    add("cost", org="beta", workflow="render", value="5")
    add("high_priority", chart=str(charts[0].pk), value="true")
    add("provider_pause", provider="openai", org="", until="2099-01-01T00:00")
    page.click("#whatif-apply")
    page.wait_for_function("() => document.querySelector('#whatif-changes').children.length === 0", timeout=10_000)
    assert SchedulerConfig.load().budget == 7
    assert Org.objects.get(slug="acme").weight == 6
    assert WorkflowCost.objects.get(org=tenants.org_b).cost == 5
    assert Chart.objects.get(pk=charts[0].pk).high_priority
    assert ProviderPause.objects.get().org is None
    add("provider_resume", provider="openai", org="")
    add("weight", org="beta", value="-1")
    page.click("#whatif-apply")
    page.wait_for_selector('#whatif-err:has-text("weight:")', timeout=5000)
    assert not ProviderPause.objects.filter(until__gt=timezone.now()).exists()
    assert page.locator("#whatif-changes li").count() == 1  # the refused change stays, to be fixed
    assert Org.objects.get(slug="beta").weight == 1
    assert violations.seen == []


def test_the_page_reconnects_and_resyncs_after_a_redis_blip(
    django_db_setup: None, chromium: Any, tenants: Tenants, tmp_path: Path
) -> None:
    redis_port = free_port()
    redis = service(start_redis(tmp_path, port=redis_port))
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
            org_services.org_hold(org=tenants.org_b, actor=Actor("user:test", staff=True))
            redis = service(start_redis(tmp_path, port=redis_port))
            page.wait_for_selector("body[data-live=live]", timeout=20_000)
            page.wait_for_function(
                "() => document.querySelector('tr[data-org=\"beta\"] [data-hold]')?.textContent === 'Release'",
                timeout=5000,
            )
            # The new Redis knows no groups: the reconnect joined again, so hints flow once more.
            other = context.new_page()
            other.goto(url + "/dashboard/")
            other.wait_for_selector("body[data-live=live]", timeout=10_000)
            other.locator('tr[data-org="beta"] [data-hold]').click()
            page.wait_for_function(
                "() => document.querySelector('tr[data-org=\"beta\"] [data-hold]')?.textContent === 'Hold'",
                timeout=3000,
            )
            _shot(page, "dashboard-after-redis-blip")
            context.close()
    finally:
        redis.stop()


def test_the_queue_holds_still_under_the_pointer_and_the_cancel_names_the_chart(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    """While the pointer is over the queue, the updates hints bring wait behind a bar that counts them:
    the row under the pointer is the same element, showing the same chart; leaving the queue shows
    them. The cancel lever's confirmation names the chart as its row shows it (external id, org)."""
    from scheduling.replan import plan_refresh

    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 30)
    plan_refresh()
    page, violations = _lever_page(chromium, live_url, tenants.staff)
    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))
    page.wait_for_selector("body[data-ready]", timeout=10_000)  # the header and org table are in: nothing shifts
    page.wait_for_timeout(300)
    first = page.locator("#queue-rows .vt-row[data-chart]").first
    under = first.get_attribute("data-chart")
    first.locator("span").nth(1).hover()
    page.evaluate("() => { document.querySelector('#queue-rows .vt-row[data-chart]').dataset.mark = 'kept'; }")
    prioritize = """async (id) => {
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const headers = {"Content-Type": "application/json", "X-CSRFToken": csrf};
        const body = JSON.stringify({high_priority: true});
        return (await fetch(`/api/v1/charts/${id}/prioritize/`, {method: "POST", headers, body})).status;
    }"""
    count = "() => parseInt(document.querySelector('#queue-wait.on button')?.textContent || '0', 10)"
    moved = [charts[7].pk, charts[9].pk]
    assert page.evaluate(prioritize, moved[0]) == 200
    page.wait_for_function(f"() => ({count})() >= 1", timeout=5000)
    seen = page.evaluate(count)
    assert page.evaluate(prioritize, moved[1]) == 200
    page.wait_for_function(f"() => ({count})() > {seen}", timeout=5000)
    assert page.text_content("#queue-wait button") == f"{page.evaluate(count)} updates wait — show"
    _shot(page, "dashboard-queue-held")
    # Nothing moved under the pointer: the same row element, the same chart, no star yet.
    assert page.locator("#queue-rows .vt-row[data-chart]").first.get_attribute("data-mark") == "kept"
    assert page.locator("#queue-rows .vt-row[data-chart]").first.get_attribute("data-chart") == under
    assert page.locator("#queue-rows .badge.hp").count() == 0

    page.mouse.move(5, 5)  # the pointer leaves the queue: the updates are shown
    page.wait_for_selector("#queue-wait:not(.on)", timeout=3000)
    for pk in moved:
        page.wait_for_selector(f'#queue-rows .vt-row[data-chart="{pk}"] .badge.hp', timeout=3000)
    # Full text for cells that may be cut short.
    row = page.locator(f'#queue-rows .vt-row[data-chart="{moved[0]}"]')
    assert row.locator(":scope > span").nth(2).get_attribute("title") == charts[7].org.slug
    assert row.locator(".badge.reason").get_attribute("title")

    target = charts[12]
    page.click(f'#queue-rows .vt-row[data-chart="{target.pk}"] button[data-act=cancel]')
    _until(lambda: Chart.objects.get(pk=target.pk).state == ChartState.CANCELLED)
    assert asked == [f"Cancel {target.external_id} of {target.org.slug}?"]
    assert violations.seen == []
