"""The dashboard in real headless Chromium against a live daphne: a reason goes with the levers pulled
from the page and shows in its events; an edit of an org, a cost or the scheduler's configuration
changed through the API since the page showed it is refused (412) and says so, never overwriting."""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from charts.models import ChartEvent, ChartState
from knobs.models import ConfigChange, SchedulerConfig
from orgs.access import api_token_issue
from orgs.models import Org, OrgChange, WorkflowCost
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.dashboard.live import CHROMIUM, session_cookie

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def _page(chromium: Any, base_url: str, user: Any) -> tuple[Any, Violations]:
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(user, base_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(base_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    return page, violations


def _until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the lever did not land"
        time.sleep(0.05)


def _api(base_url: str, secret: str, method: str, path: str, body: dict[str, Any]) -> int:
    """Someone else's edit through the API (a staff token), while the page is open."""
    address = urlsplit(base_url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=10)
    try:
        connection.request(
            method,
            path,
            body=json.dumps(body),
            headers={"Authorization": f"Token {secret}", "Content-Type": "application/json"},
        )
        return connection.getresponse().status
    finally:
        connection.close()


def test_levers_pulled_with_a_reason_show_it_in_the_events(live_url: str, chromium: Any, tenants: Tenants) -> None:
    charts = plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 4)
    page, violations = _page(chromium, live_url, tenants.staff)
    events = "#events"

    # A hold from the org editor, with the reason written for the customer.
    page.click('tr[data-org="beta"] [data-edit]')
    assert page.text_content("#org-editor [data-editor-hold]") == "Hold"
    page.fill("#org-reason", "We are migrating your data until 18:00 UTC")
    page.click("#org-editor [data-editor-hold]")
    _until(lambda: Org.objects.get(slug="beta").is_held)
    assert Org.objects.get(slug="beta").hold_reason == "We are migrating your data until 18:00 UTC"
    page.wait_for_selector(f"{events} li:has-text('We are migrating your data until 18:00 UTC')", timeout=5000)
    page.wait_for_selector("#org-editor [data-editor-hold]:text-is('Release')", timeout=5000)
    assert page.input_value("#org-reason") == ""  # used: the next lever starts without it

    # A weight with a reason (the editor's reason goes with its forms).
    page.click('tr[data-org="acme"] [data-edit]')
    page.fill("#org-reason", "contract: double share")
    page.fill("#org-editor [name=weight]", "4")
    page.press("#org-editor [name=weight]", "Enter")
    _until(lambda: Org.objects.get(slug="acme").weight == 4)
    assert OrgChange.objects.filter(org=tenants.org_a).first().reason == "contract: double share"  # type: ignore[union-attr]
    page.wait_for_selector(f"{events} li:has-text('contract: double share')", timeout=5000)

    # The scheduler's budget with a reason.
    page.fill("#config-reason", "more workers tonight")
    page.fill("#form-budget [name=budget]", "12")
    page.press("#form-budget [name=budget]", "Enter")
    _until(lambda: SchedulerConfig.load().budget == 12)
    assert ConfigChange.objects.get(field="budget").reason == "more workers tonight"
    page.wait_for_selector(f"{events} li:has-text('more workers tonight')", timeout=5000)

    # A chart lever with the queue's reason.
    chart = charts[0]
    page.fill("#lever-reason", "customer asked by phone")
    page.click(f'#queue-rows .vt-row[data-chart="{chart.pk}"] button[data-act=pause]')
    _until(lambda: ChartEvent.objects.filter(chart=chart, to_state=ChartState.PAUSED).exists())
    assert ChartEvent.objects.get(chart=chart, to_state=ChartState.PAUSED).reason == "customer asked by phone"
    page.wait_for_selector(f"{events} li:has-text('customer asked by phone')", timeout=5000)

    # The what-if panel's Apply all: each change through its lever, with the panel's reason.
    page.select_option("#form-whatif [name=kind]", "hold")
    page.select_option("#form-whatif [name=org]", "acme")
    page.click("#form-whatif button[type=submit]")
    page.select_option("#form-whatif [name=kind]", "budget")
    page.fill("#form-whatif [name=value]", "14")
    page.click("#form-whatif button[type=submit]")
    page.fill("#whatif-reason", "Planned maintenance tonight")
    page.click("#whatif-apply")
    page.wait_for_function("() => document.querySelector('#whatif-changes').children.length === 0", timeout=10_000)
    assert Org.objects.get(slug="acme").hold_reason == "Planned maintenance tonight"
    assert ConfigChange.objects.filter(field="budget").first().reason == "Planned maintenance tonight"  # type: ignore[union-attr]
    assert page.input_value("#whatif-reason") == ""

    # A bad reason: the API's 400 names it beside the control, nothing is written.
    page.click('tr[data-org="acme"] [data-edit]')
    page.fill("#org-reason", "zero\u200bwidth")  # an invisible character (the input stops at 500)
    page.fill("#org-editor [name=max_concurrency]", "2")
    page.press("#org-editor [name=max_concurrency]", "Enter")
    page.wait_for_selector('#org-editor form:has([name=max_concurrency]) [data-err]:has-text("reason:")', timeout=5000)
    assert Org.objects.get(slug="acme").max_concurrency is None
    assert violations.seen == []


def test_an_edit_of_something_changed_meanwhile_says_so_and_writes_nothing(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 2)
    secret = api_token_issue(user=tenants.staff, staff=True)  # type: ignore[arg-type]
    page, violations = _page(chromium, live_url, tenants.staff)
    weight = "#org-editor [name=weight]"

    # The org: the operator types a weight; meanwhile someone sets it through the API.
    page.click('tr[data-org="beta"] [data-edit]')
    page.fill(weight, "7")
    assert _api(live_url, secret, "PATCH", "/api/v1/orgs/beta/", {"weight": 3}) == 200
    page.wait_for_selector('tr[data-org="beta"][data-weight="3"]', timeout=5000)  # the row follows
    assert page.input_value(weight) == "7"  # what the operator typed stays
    page.press(weight, "Enter")
    slot = "#org-editor form:has([name=weight]) [data-err]"
    page.wait_for_selector(f'{slot}:has-text("changed by someone else meanwhile: now weight 3")', timeout=5000)
    assert Org.objects.get(slug="beta").weight == 3  # not overwritten
    assert page.input_value(weight) == "3"  # the form shows what is there now
    # Set again, knowingly: it lands.
    page.fill(weight, "7")
    page.press(weight, "Enter")
    _until(lambda: Org.objects.get(slug="beta").weight == 7)

    # A cost: the same.
    page.fill("#org-editor form.costs [name=cost]", "5")
    assert _api(live_url, secret, "PUT", "/api/v1/orgs/beta/costs/render/", {"cost": 2}) == 200
    page.press("#org-editor form.costs [name=cost]", "Enter")
    page.wait_for_selector(
        '#org-editor form.costs [data-err]:has-text("changed by someone else meanwhile: now cost 2")', timeout=5000
    )
    assert WorkflowCost.objects.get(org=tenants.org_b).cost == 2

    # The scheduler's configuration: the operator types a budget, someone else sets another.
    budget = "#form-budget [name=budget]"
    page.fill(budget, "20")
    assert _api(live_url, secret, "PATCH", "/api/v1/scheduler/config/", {"budget": 15}) == 200
    page.press(budget, "Enter")
    page.wait_for_selector(
        '#form-budget [data-err]:has-text("changed by someone else meanwhile: now budget 15")', timeout=5000
    )
    assert SchedulerConfig.load().budget == 15
    page.wait_for_function("() => document.querySelector('#form-budget [name=budget]').value === '15'", timeout=5000)
    page.fill(budget, "20")
    page.press(budget, "Enter")
    _until(lambda: SchedulerConfig.load().budget == 20)
    assert violations.seen == []
