"""Every admin page with an autocomplete, in real headless Chromium against daphne, under the
Content-Security-Policy: its autocompletes (select2) open, search and pick, and the browser reports no
violation, neither in the console nor as a `securitypolicyviolation` event; the rest of the site keeps
its strict policy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from orgs.models import WorkflowCost
from tests.browser import Violations
from tests.conftest import Tenants
from tests.dashboard.live import CHROMIUM, session_cookie
from tests.factories import ProviderFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.django_db(transaction=True),
]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pages_with_an_autocomplete(tenants: Tenants) -> list[str]:
    """The change page of a row of each model admin with an autocomplete (its own or an inline's), or its
    add page when rows are not changed there."""
    request = RequestFactory().get("/admin/")
    request.user = tenants.staff
    urls = []
    for model, model_admin in admin.site._registry.items():
        inlines = [inline(model, admin.site) for inline in model_admin.inlines]
        if not (model_admin.autocomplete_fields or any(inline.autocomplete_fields for inline in inlines)):
            continue
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        row = model._default_manager.first()
        if row is not None and model_admin.has_change_permission(request, row):
            urls.append(reverse(f"{name}_change", args=[row.pk]))
        else:
            urls.append(reverse(f"{name}_add"))
    return urls


def test_no_admin_autocomplete_breaks_the_policy(live_url: str, chromium: Any, tenants: Tenants) -> None:
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=3)
    ProviderFactory()
    urls = pages_with_an_autocomplete(tenants)
    assert (
        f"/admin/orgs/org/{tenants.org_b.pk}/change/" in urls or f"/admin/orgs/org/{tenants.org_a.pk}/change/" in urls
    )
    assert "/admin/orgs/providerpause/add/" in urls

    context = chromium.new_context()
    context.add_cookies([session_cookie(tenants.staff, live_url)])
    page = context.new_page()
    violations = Violations(page)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    for url in urls:
        page.goto(live_url + url)
        page.wait_for_selector(".select2-container")
        # Open the first autocomplete, let it search (every pick, the empty term), and pick the first
        # it offers: a real pick, not its "Searching…" item (which no one can pick).
        page.locator(".select2-selection").first.click()
        pick = page.locator(".select2-results__option:not(.select2-results__message)").first
        pick.wait_for(timeout=10_000)
        pick.click()
        # A row added to an inline gets its autocomplete made then.
        adding = page.locator(".add-row a")
        for index in range(adding.count()):
            adding.nth(index).click()
            page.wait_for_timeout(200)
            page.locator(".select2-selection").last.click()
            page.wait_for_selector(".select2-results__option", timeout=10_000)
            page.keyboard.press("Escape")
        page.screenshot(path=f"/tmp/zone2_csp_{url.strip('/').replace('/', '_')}.png", full_page=True)
    assert violations.seen == [], violations.seen
    assert errors == [], errors

    # The rest of the site keeps the strict policy: no inline style there.
    response = page.goto(live_url + "/dashboard/")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "'unsafe-inline'" not in policy
    context.close()
