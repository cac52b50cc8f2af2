"""The dashboard's rescue in real headless Chromium: "Find" previews the change that saves acme's
promises with before and after, writing nothing; "Apply" with a reason pulls it (acme's weight), and
the org table follows; a lever moved by someone else since the preview is refused with a message
that says which and what it is now, nothing applied."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from common.actors import Actor
from orgs.models import Org, OrgChange
from orgs.services import org_weight_set
from tests.api.test_rescue import queue_of
from tests.browser import open_dashboard
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_rescue_preview_then_apply_changes_the_weight(live_url: str, chromium: Any, tenants: Tenants) -> None:
    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)  # cleared at weight 4
    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)

    page.select_option("#form-rescue [name=org]", "acme")
    page.click("#rescue-preview")
    page.wait_for_selector("#rescue-result:not([hidden])", timeout=10_000)
    assert "acme's weight to 4" in (page.text_content("#rescue-change") or "")
    assert "clears every at-risk chart" in (page.text_content("#rescue-change") or "")
    row = page.locator('#rescue-orgs tbody tr[data-org="acme"]')
    assert [cell.strip() for cell in row.locator("td").all_inner_texts()[:3]] == ["acme", "1", "0"]
    assert Org.objects.get(slug="acme").weight == 1  # the preview wrote nothing

    page.click("#rescue-apply")
    assert "reason" in (page.text_content("#rescue-err") or "")  # a rescue is applied with a reason
    page.fill("#rescue-reason", "acme's 24 h promise")
    page.click("#rescue-apply")
    page.wait_for_selector("#rescue-result[hidden]", state="attached", timeout=10_000)

    assert Org.objects.get(slug="acme").weight == 4
    line = OrgChange.objects.get(org=tenants.org_a, field="weight")
    assert (line.new_value, line.reason, line.actor) == ("4", "acme's 24 h promise", "user:stella")
    # The panel follows: the org table shows acme's new weight (the lever's announcement).
    page.wait_for_function(
        """() => { const row = document.querySelector('#org-rows tr[data-org="acme"]');
                   return row && row.cells[1].textContent.trim() === "4"; }""",
        timeout=10_000,
    )
    assert not violations.seen, violations.seen
    context.close()


def test_a_weight_changed_since_the_preview_is_refused_with_what_it_is_now(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    queue_of(tenants, acme_due=[5.5, 5.5, 5.5, 5.5], beta=4, rescue_max_weight=10)
    context, page, violations = open_dashboard(chromium, live_url, tenants.staff)
    page.select_option("#form-rescue [name=org]", "acme")
    page.click("#rescue-preview")
    page.wait_for_selector("#rescue-result:not([hidden])", timeout=10_000)
    assert "acme's weight to 4" in (page.text_content("#rescue-change") or "")

    # Another operator sets acme's weight meanwhile.
    org_weight_set(org=Org.objects.get(slug="acme"), weight=2, actor=Actor.system("another operator"))
    page.fill("#rescue-reason", "acme's 24 h promise")
    page.click("#rescue-apply")
    page.wait_for_function(
        "() => document.querySelector('#rescue-err').textContent.includes('changed')", timeout=10_000
    )

    message = page.text_content("#rescue-err") or ""
    assert "the weight of acme was changed since the rescue was searched: it is now 2" in message, message
    assert "nothing was applied; find the rescue again" in message, message
    assert Org.objects.get(slug="acme").weight == 2
    assert not OrgChange.objects.filter(org=tenants.org_a, field="weight", actor="user:stella").exists()
    assert not violations.seen, violations.seen
    context.close()
