"""Login throttling on every login form (admin, which the dashboard uses, and the portal's), and the
Content-Security-Policy every HTML page carries."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import Tenants

LOGINS = ["/admin/login/", "/accounts/login/"]


def attempt(path: str, username: str, password: str, address: str = "10.0.0.1") -> Any:
    client = Client(REMOTE_ADDR=address)
    client.get(path)  # the CSRF cookie, as a browser has it (the test client does not check it anyway)
    return client.post(path, {"username": username, "password": password})


@pytest.fixture
def passwords(tenants: Tenants) -> None:
    """Everyone can log in; bob is staff too, so that two users can log into the admin."""
    tenants.member_b.is_staff = True
    for user in (tenants.staff, tenants.member_a, tenants.member_b):
        user.set_password("right-horse-battery")
        user.save()


@pytest.mark.parametrize("path", LOGINS)
def test_repeated_failures_for_one_user_from_one_address_lock_that_pair_out_with_a_clear_429(
    tenants: Tenants, passwords: None, path: str
) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = attempt(path, "stella", "wrong", address="10.0.1.1")
        assert response.status_code == 200  # the form again, with its error

    locked = attempt(path, "stella", "wrong", address="10.0.1.1")

    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert "Too many failed logins" in locked.content.decode()
    # Locked: even the right password, from that address, waits out the cool-off.
    assert attempt(path, "stella", "right-horse-battery", address="10.0.1.1").status_code == 429
    # Another user from that address is not locked.
    assert attempt(path, "bob", "right-horse-battery", address="10.0.1.1").status_code == 302


@pytest.mark.parametrize("path", LOGINS)
def test_failures_for_a_user_from_one_address_do_not_lock_it_out_from_another(
    tenants: Tenants, passwords: None, path: str
) -> None:
    """Knowing a username is not enough to lock its owner out of the portal from anywhere."""
    for _ in range(settings.AXES_FAILURE_LIMIT):
        attempt(path, "stella", "wrong", address="10.6.6.6")
    assert attempt(path, "stella", "right-horse-battery", address="10.6.6.6").status_code == 429

    assert attempt(path, "stella", "right-horse-battery", address="10.0.3.1").status_code == 302


@pytest.mark.parametrize("path", LOGINS)
def test_repeated_failures_from_one_address_lock_it_out(tenants: Tenants, passwords: None, path: str) -> None:
    assert settings.FAIRSCHED_LOGIN_ADDRESS_FAILURES > settings.AXES_FAILURE_LIMIT
    for index in range(settings.FAIRSCHED_LOGIN_ADDRESS_FAILURES - 1):
        assert attempt(path, f"guess{index}", "wrong", address="10.9.9.9").status_code == 200
    assert attempt(path, "bob", "right-horse-battery", address="10.9.9.9").status_code == 302
    attempt(path, "bob", "wrong", address="10.9.9.8")  # another address's failure does not count here

    locked = attempt(path, "guess-last", "wrong", address="10.9.9.9")

    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert f"or {settings.FAIRSCHED_LOGIN_ADDRESS_FAILURES} from this address" in locked.content.decode()
    assert attempt(path, "bob", "right-horse-battery", address="10.9.9.9").status_code == 429
    assert attempt(path, "bob", "right-horse-battery", address="10.9.9.10").status_code == 302


def test_the_admin_and_portal_count_together(tenants: Tenants, passwords: None) -> None:
    """One attacker cannot double its guesses by alternating between the two forms."""
    for index in range(settings.AXES_FAILURE_LIMIT):
        attempt(LOGINS[index % 2], "bob", "wrong", address="10.0.5.1")

    assert attempt("/accounts/login/", "bob", "right-horse-battery", address="10.0.5.1").status_code == 429


def test_a_success_resets_the_count(tenants: Tenants, passwords: None) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt("/accounts/login/", "alice", "wrong")
    assert attempt("/accounts/login/", "alice", "right-horse-battery").status_code == 302

    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt("/accounts/login/", "alice", "wrong").status_code == 200
    assert attempt("/accounts/login/", "alice", "right-horse-battery").status_code == 302


# Content-Security-Policy ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "path"),
    [
        (None, "/accounts/login/"),
        (None, "/admin/login/"),
        ("member_a", "/portal/acme/"),
        ("member_a", "/portal/acme/table/"),
        ("staff", "/admin/"),
        ("staff", "/admin/orgs/org/"),
        ("staff", "/dashboard/"),
        (None, "/api/docs/"),
        ("staff", "/api/v1/charts/?format=api"),
    ],
)
def test_every_html_page_has_a_strict_csp(tenants: Tenants, who: str | None, path: str) -> None:
    client = Client()
    if who:
        client.force_login(getattr(tenants, who))

    response = client.get(path)

    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    # And no page of ours relies on an inline script or handler (a JSON data block is not a script).
    html = response.content.decode()
    scripts = re.findall(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", html)
    assert not scripts, scripts
    assert not re.search(r"\son[a-z]+\s*=", html), re.search(r".{40}\son[a-z]+\s*=.{40}", html)
