"""Pytest plugin: what every browser test module shares (enabled in the root conftest).

- `live_url` (session): daphne serving the test database (the one pytest-django created) and the real
  Redis channel layer; yields its base URL. Each test empties the database after itself.
- `chromium`: headless Chromium driven by Playwright, one launch for the tests that use it back to back
  (the contexts a test leaves open are closed after it).
  Between its calls Playwright's sync API leaves its event loop marked running on this thread, so no
  async test (nor `async_to_sync`) can run while it is up: the tests that use Chromium run last (in
  collection order among themselves; on an xdist worker, last within their file: tests/file_order.py),
  and it is stopped as soon as the next test does not use it.
- `Violations`: every Content-Security-Policy complaint a page reports.
- `open_dashboard`: the live dashboard signed in as a user, its complaints watched.
- `submit_elsewhere`: submit a chart from another thread, since the test's thread runs Playwright's
  event loop, where the after-commit broadcast (async_to_sync) cannot run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from django.db import connections

from charts.services import chart_submit
from common.actors import Actor
from tests.dashboard.live import daphne, launch_chromium, session_cookie
from tests.database import database_url
from tests.file_order import uses_chromium

if TYPE_CHECKING:
    from tests.conftest import Tenants


@pytest.fixture(scope="session")
def live_url(django_db_setup: None) -> Iterator[str]:
    # A test pulls levers back to back, faster than the write rate (20/s a caller) that an operator's
    # clicks never reach: on a quiet machine a burst came back 429 instead of the refusal it tested.
    # The rates are tested against the real throttle in tests/api.
    with daphne({"DATABASE_URL": database_url(), "FAIRSCHED_API_WRITE_RATE": "1000/s"}) as url:
        yield url


class SharedChromium:
    """Playwright and its Chromium, started by the first test that asks and stopped by `stop`."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None

    def browser(self) -> Any:
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self._browser = launch_chromium(self._playwright)
        return self._browser

    def stop(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        try:
            if browser is not None:
                browser.close()
        finally:
            if playwright is not None:
                playwright.stop()


SHARED_CHROMIUM = SharedChromium()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that use Chromium last (see the module doc); a stable sort keeps every other order."""
    items.sort(key=uses_chromium)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop Chromium after the last of a run of tests that use it, once their fixtures are torn down."""
    try:
        return (yield)
    finally:
        if nextitem is None or not uses_chromium(nextitem):
            SHARED_CHROMIUM.stop()


def pytest_sessionfinish() -> None:
    """A run stopped early (-x, a failure of the session) may end inside the browser tests."""
    SHARED_CHROMIUM.stop()


@pytest.fixture
def chromium() -> Iterator[Any]:
    """The shared Chromium; the contexts (and their pages, still live) that a test leaves open are closed
    after it, so that none polls or reconnects while the next test runs."""
    browser = SHARED_CHROMIUM.browser()
    yield browser
    for context in browser.contexts:
        context.close()


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


def open_dashboard(chromium: Any, base_url: str, user: Any) -> tuple[Any, Any, Violations]:
    """(context, page, violations): the dashboard signed in as `user` in a window wide enough for both
    columns, once its socket is live."""
    context = chromium.new_context(viewport={"width": 1500, "height": 1000})
    context.add_cookies([session_cookie(user, base_url)])
    page = context.new_page()
    violations = Violations(page)
    page.goto(base_url + "/dashboard/")
    page.wait_for_selector("body[data-live=live]", timeout=10_000)
    return context, page, violations


def submit_elsewhere(tenants: Tenants, external_id: str) -> None:
    """Submit a chart of org A from another thread (see the module doc)."""

    def submit() -> None:
        try:
            chart_submit(
                org=tenants.org_a, workflow="render", external_id=external_id, actor=Actor("user:alice", staff=True)
            )
        finally:
            connections.close_all()

    thread = threading.Thread(target=submit)
    thread.start()
    thread.join()
