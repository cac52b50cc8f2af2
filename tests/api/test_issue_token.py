"""`manage.py issue_token`: creates the user (and membership) if needed, prints a working token."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from orgs.models import ApiToken, Membership, OrgChange
from tests.conftest import Tenants

ROOT = Path(__file__).resolve().parents[2]


def issue(*args: str) -> str:
    out = StringIO()
    call_command("issue_token", *args, stdout=out)
    return out.getvalue().strip()


def test_org_token_for_a_new_user(tenants: Tenants) -> None:
    secret = issue("svc-render", "--org", "acme", "--name", "render service")

    user = get_user_model().objects.get(username="svc-render")
    assert Membership.objects.filter(user=user, org=tenants.org_a).exists()
    # The membership is made by the service the admin and the API use: logged in the org's history.
    assert OrgChange.objects.filter(org=tenants.org_a, field="member", actor="cli:issue_token").exists()
    assert not user.has_usable_password()
    assert ApiToken.objects.get(user=user).name == "render service"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    response = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "cli"}, format="json")
    assert response.status_code == 201
    assert response.json()["org"] == "acme"


def test_org_token_for_an_existing_member_keeps_one_membership(tenants: Tenants) -> None:
    issue("alice", "--org", "acme")

    assert Membership.objects.filter(user=tenants.member_a).count() == 1


def test_staff_token(tenants: Tenants) -> None:
    secret = issue("stella", "--staff")

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert client.get("/api/v1/scheduler/config/").status_code == 200
    issue("new-operator", "--staff")
    assert get_user_model().objects.get(username="new-operator").is_staff


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["alice"], "--org SLUG or --staff"),
        (["alice", "--org", "no-such-org"], "no org"),
        (["alice", "--staff"], "not staff"),
        (["bad name!", "--org", "acme"], "invalid USERNAME"),
    ],
)
def test_bad_input_exits_2(tenants: Tenants, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message) as error:
        issue(*args)

    assert error.value.returncode == 2
    assert not ApiToken.objects.exists()


def test_exit_status_and_stderr_from_the_shell() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "issue_token", "someone"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        check=False,
    )

    assert result.returncode == 2
    assert "--org SLUG or --staff" in result.stderr
    assert result.stdout == ""
