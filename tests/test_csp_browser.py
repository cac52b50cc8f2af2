"""Under the Content-Security-Policy, in real headless Chromium against daphne: the portal (logged in
through its form), the admin, the dashboard and the API docs all work, and the browser reports no
violation. Also: logging out in one tab stops the live page of another tab."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.browser import Violations, submit_elsewhere
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_every_interface_works_under_the_policy(live_url: str, chromium: Any, tenants: Tenants) -> None:
    # Hashed as the server hashes (the tests' own fast hasher is not among its hashers); few rounds.
    tenants.member_a.password = PBKDF2PasswordHasher().encode("right-horse-battery", "csp-salt", iterations=1000)
    tenants.member_a.save()
    context = chromium.new_context()
    page = context.new_page()
    violations = Violations(page)

    # The portal: log in through its form, then the live page connects its socket and refetches.
    page.goto(live_url + "/accounts/login/?next=/portal/acme/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "right-horse-battery")
    page.click("button[type=submit]")
    page.wait_for_url("**/portal/acme/")
    page.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)
    submit_elsewhere(tenants, "csp-1")
    page.wait_for_selector("text=csp-1", timeout=10_000)

    # The admin and the dashboard, as staff.
    staff = chromium.new_context()
    staff.add_cookies([session_cookie(tenants.staff, live_url)])
    admin = staff.new_page()
    violations_admin = Violations(admin)
    admin.goto(live_url + "/admin/orgs/org/")
    admin.click("text=Acme")
    admin.wait_for_selector("input[name=weight]")
    admin.goto(live_url + "/dashboard/")
    admin.wait_for_selector("body[data-live=live]", timeout=10_000)
    admin.goto(live_url + "/api/docs/")
    admin.wait_for_selector(".swagger-ui .info .title", timeout=15_000)

    assert not violations.seen, violations.seen
    assert not violations_admin.seen, violations_admin.seen
    context.close()
    staff.close()


def test_logout_in_one_tab_stops_the_live_page_in_another(live_url: str, chromium: Any, tenants: Tenants) -> None:
    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.member_a, live_url)])
    watching = context.new_page()
    watching.goto(live_url + "/portal/acme/")
    watching.wait_for_selector("#live-status:has-text('Live:')", timeout=10_000)

    other = context.new_page()
    other.goto(live_url + "/portal/acme/")
    other.click("form.logout button")
    other.wait_for_url("**/accounts/logout/**", timeout=10_000)

    watching.wait_for_selector("#live-status:has-text('logged out')", timeout=10_000)
    submit_elsewhere(tenants, "after-logout")
    watching.wait_for_timeout(1500)
    assert watching.locator("text=after-logout").count() == 0
    context.close()
