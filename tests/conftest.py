"""Shared fixtures: the three tenants every cross-tenant check is written against."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from channels.layers import channel_layers
from django.contrib.auth.models import AbstractUser
from django.db import transaction
from hypothesis import settings as hypothesis_settings

from common import events
from orgs.models import Membership, Org, Workflow
from tests.factories import MembershipFactory, OrgFactory, UserFactory, WorkflowFactory

# Property tests assert behaviour, not speed: hypothesis' default deadline (200 ms an example) is a
# timed test, and failed one on a loaded machine (the drain plot's band property); speed is measured
# by the benchmarks.
hypothesis_settings.register_profile("fairsched", deadline=None)
hypothesis_settings.load_profile("fairsched")

pytest_plugins = [
    "tests.processes",
    "tests.temporal_server",
    "tests.file_order",  # before tests.browser, which imports it
    "tests.browser",
    "tests.db_flush",
    "tests.load_runs",
    "pytester",
]


@pytest.fixture
def fresh_channel_layer() -> Iterator[None]:
    """A channel layer of the test's own: the Redis layer's locks belong to the event loop that first
    used them, and each async test runs in a loop of its own (an earlier test's layer, in another
    loop, may hold one). The process's layer is put back after: `common.events`' sender keeps it."""
    kept = dict(channel_layers.backends)
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
    channel_layers.backends.update(kept)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """Hashing a test user's password with the production hasher costs most of a second."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class Tenants:
    """Org A with its member, org B with its member, an outsider in no org, and a staff user."""

    org_a: Org
    org_b: Org
    member_a: AbstractUser
    member_b: AbstractUser
    outsider: AbstractUser
    staff: AbstractUser
    workflow: Workflow


@pytest.fixture
def tenants(db: None) -> Tenants:
    org_a = OrgFactory(name="Acme", slug="acme", weight=2)
    org_b = OrgFactory(name="Beta", slug="beta", weight=1)
    member_a = UserFactory(username="alice")
    member_b = UserFactory(username="bob")
    MembershipFactory(user=member_a, org=org_a, role=Membership.Role.MEMBER)
    MembershipFactory(user=member_b, org=org_b, role=Membership.Role.MEMBER)
    outsider = UserFactory(username="olga")
    staff = UserFactory(username="stella", is_staff=True, is_superuser=True)
    workflow = WorkflowFactory(name="render", default_cost=1)
    return Tenants(org_a, org_b, member_a, member_b, outsider, staff, workflow)


@dataclass
class Announcements:
    """What left the process after commit: broadcasts as (group, message), and replan requests."""

    broadcasts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    replans: int = 0


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> Announcements:
    """Record `common.events` broadcasts and replan requests instead of sending them."""
    record = Announcements()

    def request_replan() -> None:
        record.replans += 1

    monkeypatch.setattr(events, "broadcast", lambda group, message: record.broadcasts.append((group, message)))
    monkeypatch.setattr(events, "request_replan", request_replan)
    return record


class CallerFailed(Exception):
    """Raised by `fail_after` after the action, to roll the caller's transaction back."""


def fail_after(action: Callable[[], object]) -> None:
    """Run `action` inside a transaction that then fails, as a caller failing after a service would."""
    with transaction.atomic():
        action()
        raise CallerFailed
