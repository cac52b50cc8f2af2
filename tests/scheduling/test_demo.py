"""`manage.py demo`: the demo is created through the services, once, however often the command runs."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from charts.models import Chart, ChartEvent, ChartState
from common.actors import Actor
from knobs.models import SchedulerConfig
from orgs import services
from orgs.models import Membership, Org, Workflow, WorkflowCost, WorkflowTurnaround

pytestmark = pytest.mark.django_db

# --charts 30: acme 30, beta 6, gamma 5, delta 2, and epsilon's fixed trickle of 5.
EXPECTED = {"acme": 30, "beta": 6, "gamma": 5, "delta": 2, "epsilon": 5}


def demo(*args: str) -> str:
    out = StringIO()
    call_command("demo", "--charts", "30", *args, stdout=out)
    return out.getvalue()


def charts_per_org() -> dict[str, int]:
    return {slug: Chart.objects.filter(org__slug=slug).count() for slug in EXPECTED}


def test_demo_creates_orgs_workflows_users_config_and_a_backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSCHED_ADMIN_PASSWORD", "admin-pass-for-tests")
    output = demo()

    orgs = {org.slug: org for org in Org.objects.all()}
    assert {slug: org.weight for slug, org in orgs.items()} == {
        "acme": 3,
        "beta": 2,
        "gamma": 1,
        "delta": 0,
        "epsilon": 1,
    }
    assert orgs["gamma"].max_concurrency == 2
    assert orgs["delta"].is_held
    assert services.org_release(org=orgs["delta"], actor=Actor("user:x", staff=True)).weight == 2

    workflows = {w.name: w for w in Workflow.objects.select_related("provider")}
    assert {name: (w.default_cost, w.params["duration"], w.initial_duration) for name, w in workflows.items()} == {
        "render": (1, 8, 8),
        "simulate": (3, 20, 20),
        "export": (1, 4, 4),
        "flaky": (1, 6, 6),
    }
    assert workflows["flaky"].params["fail_probability"] == 0.3
    assert workflows["export"].provider is not None
    assert workflows["export"].provider.slug == "geo-api"
    assert {w.workflow_type for w in workflows.values()} == {"fairsched.demo"}
    assert {w.task_queue for w in workflows.values()} == {settings.TEMPORAL_TASK_QUEUE}
    assert set(WorkflowCost.objects.values_list("org__slug", "workflow__name", "cost")) == {
        ("acme", "simulate", 2),
        ("beta", "export", 2),
    }

    # Promises: Acme and Beta on the org, Gamma for its simulations only; each chart due by its own.
    assert {slug: (org.turnaround, org.turnaround_share) for slug, org in orgs.items() if org.turnaround} == {
        "acme": (600, 0.9),
        "beta": (1800, 0.95),
    }
    assert set(WorkflowTurnaround.objects.values_list("org__slug", "workflow__name", "turnaround")) == {
        ("gamma", "simulate", 1200),
    }
    for chart in Chart.objects.select_related("org", "workflow"):
        promised = {"acme": 600, "beta": 1800}.get(chart.org.slug)
        if chart.org.slug == "gamma" and chart.workflow.name == "simulate":
            promised = 1200
        expected_due = None if promised is None else chart.created_at + timedelta(seconds=promised)
        assert chart.due_at == expected_due, (chart.org.slug, chart.workflow.name)

    config = SchedulerConfig.load()
    assert (config.budget, config.max_attempts, config.backoff_base) == (8, 3, 5.0)

    assert charts_per_org() == EXPECTED
    assert set(Chart.objects.values_list("state", flat=True)) == {ChartState.QUEUED}
    # Submitted through the service: every chart has its birth event, by the demo.
    assert ChartEvent.objects.filter(actor="system:demo", from_state="", to_state="queued").count() == 48

    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert admin.is_staff
    assert admin.check_password("admin-pass-for-tests")
    assert "http://127.0.0.1:8000/admin/" in output
    assert "user admin  password admin-pass-for-tests" in output
    for slug in EXPECTED:
        customer = get_user_model().objects.get(username=f"{slug}-customer")
        assert not customer.is_staff
        assert Membership.objects.get(user=customer).org.slug == slug
        password = re.search(rf"user {slug}-customer  password (\S+)", output)
        assert password is not None
        assert customer.check_password(password.group(1))


def test_a_generated_admin_password_is_printed_once_and_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAIRSCHED_ADMIN_PASSWORD", raising=False)
    first = demo()
    password = re.search(r"user admin  password (\S+)", first)
    assert password is not None
    assert get_user_model().objects.get(username="admin").check_password(password.group(1))
    second = demo()
    assert password.group(1) not in second
    assert "exists already" in second
    assert get_user_model().objects.get(username="admin").check_password(password.group(1))


def test_running_it_again_duplicates_nothing_and_keeps_changes() -> None:
    demo()
    acme = Org.objects.get(slug="acme")
    services.org_weight_set(org=acme, weight=5, actor=Actor("user:manager", staff=True))
    services.workflow_cost_set(
        org=acme, workflow=Workflow.objects.get(name="simulate"), cost=None, actor=Actor("user:x", staff=True)
    )
    counts = (Org.objects.count(), Workflow.objects.count(), get_user_model().objects.count(), Chart.objects.count())
    events = ChartEvent.objects.count()

    output = demo()

    assert (Org.objects.count(), Workflow.objects.count(), get_user_model().objects.count()) == counts[:3]
    assert Chart.objects.count() == counts[3]
    assert ChartEvent.objects.count() == events
    assert Org.objects.get(slug="acme").weight == 5
    assert not WorkflowCost.objects.filter(org__slug="acme").exists()
    assert "48 charts (0 new)" in output


def test_a_bigger_backlog_adds_only_the_missing_charts() -> None:
    demo()
    out = StringIO()
    call_command("demo", "--charts", "60", stdout=out)
    assert charts_per_org() == {"acme": 60, "beta": 12, "gamma": 10, "delta": 4, "epsilon": 5}


def test_reset_starts_over() -> None:
    demo()
    acme = Org.objects.get(slug="acme")
    services.org_weight_set(org=acme, weight=9, actor=Actor("user:manager", staff=True))
    Chart.objects.filter(org=acme).update(state=ChartState.SUCCEEDED)
    output = demo("--reset")
    assert "Reset" in output
    assert Org.objects.get(slug="acme").weight == 3
    assert charts_per_org() == EXPECTED
    assert set(Chart.objects.values_list("state", flat=True)) == {ChartState.QUEUED}
    assert get_user_model().objects.filter(username="admin").count() == 1


def test_a_negative_backlog_is_refused() -> None:
    with pytest.raises(CommandError):
        call_command("demo", "--charts", "-1", stdout=StringIO())
    assert not Org.objects.exists()
