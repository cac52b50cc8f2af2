"""An operator's own lever shows its answer on the row under their hand, even when the queue's
refetch for a hint overtakes the lever's own (in real headless Chromium)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from charts.models import Chart
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


def test_the_lever_s_answer_shows_under_the_pointer_when_a_hint_s_refetch_overtakes_it(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    """Found as a flaky CI test: the lever's refetch (shown even under the hand) was overtaken by the
    hint's (newer, so the lever's was dropped), which waited behind the "updates wait" bar because the
    pointer was still on the row: the star the operator had just set never showed."""
    from scheduling.replan import plan_refresh

    plan_queue([tenants.org_a, tenants.org_b], tenants.workflow, 30)
    plan_refresh()
    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)
    first = page.locator("#queue-rows .vt-row[data-chart]").first
    chart_id = int(first.get_attribute("data-chart") or 0)

    # In the page: the first queue refetch after the lever's call answers 1.5 s late, so that the
    # hint's refetch (the lever's own event) goes out and comes back first.
    page.evaluate(
        """() => {
        const fetch0 = window.fetch;
        window.leverSeen = [];
        window.fetch = (input, init) => {
            const url = String(input.url || input);
            if (url.includes("/prioritize/")) window.leverSeen.push("lever");
            else if (url.includes("/dashboard/queue/") && window.leverSeen.length === 1) {
                window.leverSeen.push("held");
                return new Promise((done) => setTimeout(done, 1500)).then(() => fetch0(input, init));
            }
            else if (url.includes("/dashboard/queue/") && window.leverSeen.length) window.leverSeen.push("queue");
            return fetch0(input, init);
        };
    }"""
    )
    first.locator("button[data-act=priority]").click()  # the pointer stays on the row

    page.wait_for_function(
        f"() => !!document.querySelector('#queue-rows .vt-row[data-chart=\"{chart_id}\"] .badge.hp')", timeout=10_000
    )
    assert Chart.objects.get(pk=chart_id).high_priority
    # The lever's refetch was held back and the hint's went meanwhile.
    assert page.evaluate("window.leverSeen").count("queue") >= 1
    assert not violations.seen, violations.seen
    context.close()
