"""Portal fixtures: browser sessions per tenant."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from common import events
from tests.conftest import Tenants


@pytest.fixture(autouse=True)
def no_replan_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "request_replan", lambda: None)


@pytest.fixture
def browser(tenants: Tenants) -> Callable[[Any], Client]:
    """A browser logged in as a user (None: anonymous)."""

    def make(user: Any) -> Client:
        client = Client()
        if user is not None:
            client.force_login(user)
        return client

    return make
