"""Two edits of one org, the second sent before the first's answer is back: in real headless
Chromium, each edit of a row sends the version the one before it made, so the operator's own
quick edits never refuse each other as "changed meanwhile"."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from common import events
from orgs.models import Org
from tests.browser import open_dashboard
from tests.conftest import Tenants
from tests.dashboard.conftest import plan_queue
from tests.dashboard.live import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_a_second_edit_sent_while_the_first_is_answered_lands_too(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 4)
    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)
    page.click('tr[data-org="beta"] [data-edit]')
    editor = "#org-editor"

    # The first edit's answer is held back in the browser once the server has made it.
    held: list[Any] = []
    patches: list[str] = []

    def hold_the_first(route: Any) -> None:
        patches.append(route.request.headers.get("if-match", ""))
        if len(patches) == 1:
            held.append((route, route.fetch()))
        else:
            route.continue_()

    page.route(
        "**/api/v1/orgs/beta/",
        lambda route: hold_the_first(route) if route.request.method == "PATCH" else route.continue_(),
    )
    page.fill(f"{editor} [name=weight]", "4")
    page.press(f"{editor} [name=weight]", "Enter")
    deadline = time.monotonic() + 10
    while not held:
        assert time.monotonic() < deadline, "the first edit was never sent"
        page.wait_for_timeout(50)
    assert Org.objects.get(slug="beta").weight == 4  # made on the server, its answer not yet read

    page.fill(f"{editor} [name=max_concurrency]", "2")
    page.press(f"{editor} [name=max_concurrency]", "Enter")
    page.wait_for_timeout(300)
    route, response = held.pop()
    route.fulfill(response=response)

    deadline = time.monotonic() + 10
    while Org.objects.get(slug="beta").max_concurrency != 2:
        assert time.monotonic() < deadline, f"the second edit did not land (If-Match sent: {patches})"
        page.wait_for_timeout(50)
    assert len(patches) == 2, patches
    assert patches[0] != patches[1], patches  # the second sent the version the first made
    assert page.locator(f"{editor} form:has([name=max_concurrency]) [data-err]").inner_text() == ""
    assert not violations.seen, violations.seen
    context.close()


def test_a_swap_keeps_the_selection_of_the_control_in_focus(live_url: str, chromium: Any, tenants: Tenants) -> None:
    """A region swapped while the operator has selected a control's text (focus in it, nothing typed
    yet) gives the new control the focus and the same selection: what they type then replaces it
    (the caret went to the start: "9" typed over a selected "10" made "910")."""
    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)
    budget = "#form-budget [name=budget]"
    page.focus(budget)
    page.evaluate(f"() => {{ const i = document.querySelector('{budget}'); i.select(); i.dataset.old = '1'; }}")
    events.broadcast(events.STAFF_GROUP, {"kind": "config"})
    page.wait_for_function(f"() => !document.querySelector('{budget}').dataset.old", timeout=10_000)
    page.keyboard.type("9")
    assert page.input_value(budget) == "9"
    assert not violations.seen, violations.seen
    context.close()
