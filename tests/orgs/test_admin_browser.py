"""Two admin pages on one org, in real headless Chromium against daphne: an operator's hold made while an
account manager's change form is open survives that form's save, and an edit of the very field moved
meanwhile is refused on the page with the value now stored."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from orgs.models import Org, OrgChange
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def run_action(page: Any, live_url: str, action: str, org: Org) -> None:
    page.goto(live_url + "/admin/orgs/org/")
    page.check(f"input[name=_selected_action][value='{org.pk}']")
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")
    page.wait_for_selector("ul.messagelist li.success")


def test_a_hold_made_in_another_page_survives_and_a_clashing_edit_is_refused(
    live_url: str, chromium: Any, tenants: Tenants
) -> None:
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    manager, operator = context.new_page(), context.new_page()
    change_page = f"{live_url}/admin/orgs/org/{tenants.org_a.pk}/change/"

    manager.goto(change_page)
    run_action(operator, live_url, "hold", tenants.org_a)
    manager.fill("input[name=queue_limit]", "50")
    manager.click("input[name=_save]")
    manager.wait_for_selector("ul.messagelist li.success")
    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.weight, org.queue_limit) == (0, 50)
    fields = list(OrgChange.objects.filter(org=org).order_by("at", "id").values_list("field", "new_value"))
    assert fields == [("hold", "held"), ("queue_limit", "50")]

    manager.goto(change_page)
    run_action(operator, live_url, "release", tenants.org_a)
    manager.fill("input[name=weight]", "3")
    manager.click("input[name=_save]")
    manager.wait_for_selector(".errorlist")
    assert "it is now 2" in manager.inner_text(".field-weight")
    assert Org.objects.get(pk=tenants.org_a.pk).weight == 2
    context.close()
