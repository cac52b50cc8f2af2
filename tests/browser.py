"""Pytest plugin: what every browser test module shares (enabled in the root conftest).

- `live_url` (module): daphne serving the test database (the one pytest-django created) and the real
  Redis channel layer; yields its base URL.
- `chromium` (module): headless Chromium driven by Playwright. Module-scoped: Playwright's loop must be
  gone before the async tests of other modules run.
- `Violations`: every Content-Security-Policy complaint a page reports.
- `submit_elsewhere`: submit a chart from another thread, since the test's thread runs Playwright's
  event loop, where the after-commit broadcast (async_to_sync) cannot run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings
from django.db import connections

from charts.services import chart_submit
from tests.dashboard.live import daphne, launch_chromium

if TYPE_CHECKING:
    from tests.conftest import Tenants


def database_url() -> str:
    """The URL of the test database, for a server started as another process."""
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture(scope="module")
def live_url(django_db_setup: None) -> Iterator[str]:
    # A test pulls levers back to back, faster than the write rate (20/s a caller) that an operator's
    # clicks never reach: on a quiet machine a burst came back 429 instead of the refusal it tested.
    # The rates are tested against the real throttle in tests/api.
    with daphne({"DATABASE_URL": database_url(), "FAIRSCHED_API_WRITE_RATE": "1000/s"}) as url:
        yield url


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch_chromium(playwright)
        yield launched
        launched.close()


class Violations:
    """Every CSP complaint the page's console and the page's own listener report."""

    def __init__(self, page: Any) -> None:
        self.seen: list[str] = []
        page.on("console", self._console)
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e =>"
            " console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI"
            " + ' at ' + e.sourceFile + ':' + e.lineNumber + ' on ' + document.URL));"
        )

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            self.seen.append(message.text)


def submit_elsewhere(tenants: Tenants, external_id: str) -> None:
    """Submit a chart of org A from another thread (see the module doc)."""

    def submit() -> None:
        try:
            chart_submit(org=tenants.org_a, workflow="render", external_id=external_id, actor="user:alice")
        finally:
            connections.close_all()

    thread = threading.Thread(target=submit)
    thread.start()
    thread.join()
