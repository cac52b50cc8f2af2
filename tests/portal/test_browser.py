"""The portal's levers in real headless Chromium against daphne, under the Content-Security-Policy:
a member submits one chart and a file, pauses, resumes and cancels; the chart's history shows who did
it and why; the org page draws the drain plot styled from the stylesheet; a viewer sees no buttons;
the live table still updates; and the browser reports no CSP violation."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from charts.models import ChartState
from orgs.models import Membership
from tests.browser import Violations, submit_elsewhere
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ChartFactory, MembershipFactory, UserFactory, charts_with_bands

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_cancel_asks_first_and_keeping_it_changes_nothing(live_url: str, chromium: Any, tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="trial-bulk-022")
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")

    page.fill("#cancel-reason", "ordered twice")
    page.click("button:text-is('Cancel chart…')")
    assert page.locator("h1").inner_text() == f"Cancel chart trial-bulk-022 of {tenants.org_a.name}?"
    assert page.input_value("#cancel-reason") == "ordered twice"
    page.click("a:text-is('No, keep it')")
    page.wait_for_selector("dd .state")
    chart.refresh_from_db()
    assert chart.state == ChartState.QUEUED

    page.click("button:text-is('Cancel chart…')")
    page.click("button:text-is('Yes, cancel trial-bulk-022')")
    page.wait_for_selector("text=Cancelled trial-bulk-022.")
    chart.refresh_from_db()
    assert chart.state == ChartState.CANCELLED
    assert not violations.seen, violations.seen


def test_a_member_acts_from_the_portal(live_url: str, chromium: Any, tenants: Tenants) -> None:
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(live_url + "/portal/acme/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)

    # One chart from the form: to its page, which says so.
    page.select_option("#submit-workflow", "render")
    page.fill("#submit-external-id", "web-1")
    page.fill("#submit-priority", "3")
    page.fill("#submit-payload", '{"pages": 2}')
    page.click("form.submit-one button[type=submit]")
    page.wait_for_selector("text=Submitted web-1.")
    assert page.locator("dd .state").inner_text() == "Queued"

    # Pause with a reason, resume, cancel: each shows in the state and the history, with its actor.
    page.fill("#pause-reason", "waiting for the client")
    page.click("button:text-is('Pause')")
    page.wait_for_selector("text=Paused web-1.")
    assert page.locator("dd .state").inner_text() == "Paused"
    page.click("button:text-is('Resume')")
    page.wait_for_selector("text=Resumed web-1.")
    page.fill("#cancel-reason", "client withdrew")
    page.click("button:text-is('Cancel chart…')")
    page.click("button:text-is('Yes, cancel web-1')")
    page.wait_for_selector("text=Cancelled web-1.")
    history = page.locator("table.history tbody").inner_text()
    assert "Queued → Paused\twaiting for the client\tuser:alice" in history
    assert "Paused → Queued" in history
    assert "Queued → Cancelled\tclient withdrew\tuser:alice" in history
    assert "UTC (" in history  # times in UTC and relative
    assert page.locator(".levers").count() == 0  # nothing left to change on a cancelled chart

    # A file: all of it; then a bad file: nothing, and the row and field named.
    page.goto(live_url + "/portal/acme/")
    page.set_input_files(
        "#submit-file",
        files=[
            {"name": "charts.csv", "mimeType": "text/csv", "buffer": b"workflow,external_id\nrender,f-1\nrender,f-2\n"}
        ],
    )
    page.click("form.submit-file button[type=submit]")
    page.wait_for_selector("text=Submitted 2 charts; 0 submitted before.")
    page.set_input_files(
        "#submit-file",
        files=[{"name": "bad.csv", "mimeType": "text/csv", "buffer": b"workflow,external_id\nrender,f-3\nnope,f-4\n"}],
    )
    page.click("form.submit-file button[type=submit]")
    page.wait_for_selector("text=row 2 (line 3): workflow: unknown workflow 'nope'")
    assert "Nothing was changed." in page.inner_text("main")

    # The live table still follows changes made elsewhere.
    page.goto(live_url + "/portal/acme/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
    submit_elsewhere(tenants, "live-1")
    page.wait_for_selector("text=live-1", timeout=10_000)

    assert not violations.seen, violations.seen
    context.close()


def test_the_drain_plot_and_history_render_under_the_policy(live_url: str, chromium: Any, tenants: Tenants) -> None:
    charts_with_bands(tenants.org_a, tenants.workflow)
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)

    page.goto(live_url + "/portal/acme/")
    plot = page.locator("#drain-plot")
    plot.wait_for()
    box = plot.bounding_box()
    band_fill = page.eval_on_selector(".drain-band", "e => getComputedStyle(e).fill")
    line_stroke = page.eval_on_selector(".drain-line", "e => getComputedStyle(e).stroke")

    assert box is not None
    assert box["width"] > 200
    assert box["height"] > 40
    assert band_fill != "none"
    assert line_stroke != "none"
    assert "Charts left over time: 3 now" in page.inner_text("figcaption")
    assert not violations.seen, violations.seen
    context.close()


def test_relative_times_stay_true_while_the_page_is_open(live_url: str, chromium: Any, tenants: Tenants) -> None:
    available = timezone.now() + timedelta(minutes=4, seconds=10)
    chart = ChartFactory(
        org=tenants.org_a, workflow=tenants.workflow, state=ChartState.RETRY_WAIT, attempt=1, available_at=available
    )
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    page = context.new_page()
    violations = Violations(page)
    page.clock.install()

    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    retry = page.locator(".retry .relative")
    before = retry.inner_text()
    page.clock.fast_forward("02:00")
    page.wait_for_function("() => document.querySelector('.retry .relative').textContent === '(in 2 min)'")

    assert before == "(in 4 min)"
    assert not violations.seen, violations.seen
    context.close()


def test_a_viewer_sees_no_buttons(live_url: str, chromium: Any, tenants: Tenants) -> None:
    viewer = UserFactory(username="vera")
    MembershipFactory(user=viewer, org=tenants.org_a, role=Membership.Role.VIEWER)
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="read-only-1")
    context = chromium.new_context()
    context.add_cookies([session_cookie(viewer, live_url)])
    page = context.new_page()

    page.goto(live_url + "/portal/acme/")
    page.wait_for_selector("text=read-only-1")
    org_buttons = page.locator("main button").count()
    page.goto(f"{live_url}/portal/acme/charts/{chart.pk}/")
    page.wait_for_selector("h1:has-text('read-only-1')")

    assert org_buttons == 1  # the filter's "Show", nothing that writes
    assert page.locator("main button").count() == 0
    context.close()
