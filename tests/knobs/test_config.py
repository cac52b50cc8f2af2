"""The scheduler's configuration: one row, guarded by the database, changed only through the service."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from common.actors import Actor
from common.errors import InvalidInput
from common.events import STAFF_GROUP
from knobs import levers, services
from knobs.models import ConfigChange, SchedulerConfig
from tests.admin_helpers import change_form_data, messages_of
from tests.conftest import Announcements, Tenants

pytestmark = pytest.mark.django_db

ACTOR = Actor("user:stella", staff=True)


def violates(write: Callable[[], object]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        write()


def changes() -> list[tuple[str, str, str, str]]:
    rows = ConfigChange.objects.order_by("at", "id")
    return [(c.actor, c.field, c.old_value, c.new_value) for c in rows]


# the model


def test_load_creates_the_one_row_with_defaults() -> None:
    config = SchedulerConfig.load()
    assert (config.pk, config.budget, config.policy, config.max_attempts) == (1, 10, "round_robin", 3)
    assert SchedulerConfig.load().pk == 1
    assert SchedulerConfig.objects.count() == 1
    assert str(config) == "budget 10, Weighted round robin (by chart)"


def test_the_database_keeps_a_single_valid_row() -> None:
    SchedulerConfig.load()
    violates(lambda: SchedulerConfig.objects.create(id=2))
    rows = SchedulerConfig.objects.filter(pk=1)
    violates(lambda: rows.update(budget=0))
    violates(lambda: rows.update(quantum=0))
    violates(lambda: rows.update(aging_step=0))
    violates(lambda: rows.update(max_attempts=0))
    violates(lambda: rows.update(backoff_base=-1))
    violates(lambda: rows.update(backoff_base=20, backoff_ceiling=10))
    violates(lambda: rows.update(retry_budget_share=1.5))
    violates(lambda: rows.update(replan_interval=0))
    violates(lambda: rows.update(reconcile_interval=0))
    rows.update(aging_step=None)


@pytest.mark.parametrize(("budget", "share", "expected"), [(10, 0.5, 5), (1, 0.5, 1), (8, 0.0, 0), (8, 1.0, 8)])
def test_retry_budget_is_a_share_of_the_budget_but_at_least_one_unit(budget: int, share: float, expected: int) -> None:
    assert SchedulerConfig(budget=budget, retry_budget_share=share).retry_budget == expected


# the service


def test_budget_set_is_logged_with_the_actor() -> None:
    config = services.budget_set(budget=8, actor=ACTOR)
    assert config.budget == SchedulerConfig.load().budget == 8
    services.budget_set(budget=8, actor=ACTOR)  # no change, no row
    assert changes() == [(ACTOR.name, "budget", "10", "8")]


@pytest.mark.parametrize("budget", [0, -1, "8", True, 2.5, None, levers.BUDGET.maximum + 1])
def test_budget_set_refuses_bad_budgets(budget: Any) -> None:
    with pytest.raises(InvalidInput) as error:
        services.budget_set(budget=budget, actor=ACTOR)
    assert error.value.field == "budget"
    assert SchedulerConfig.load().budget == 10
    assert not ConfigChange.objects.exists()


def test_policy_set_with_a_quantum() -> None:
    config = services.policy_set(policy="deficit", quantum=2.5, actor=ACTOR)
    assert (config.policy, config.quantum) == ("deficit", 2.5)
    assert sorted(changes()) == [
        (ACTOR.name, "policy", "round_robin", "deficit"),
        (ACTOR.name, "quantum", "1.0", "2.5"),
    ]
    with pytest.raises(InvalidInput) as error:
        services.policy_set(policy="lottery", actor=ACTOR)
    assert error.value.field == "policy"


def test_many_settings_at_once() -> None:
    services.scheduler_config_set(
        actor=ACTOR, budget=8, max_attempts=3, backoff_base=5, backoff_ceiling=60, aging_step=30, aging_cap=5
    )
    config = SchedulerConfig.load()
    assert (config.budget, config.backoff_base, config.backoff_ceiling, config.aging_step) == (8, 5.0, 60.0, 30.0)
    changed = {field for _, field, _, _ in changes()}
    assert changed == {"budget", "backoff_base", "backoff_ceiling", "aging_step", "aging_cap"}
    services.scheduler_config_set(actor=ACTOR, aging_step=None)
    assert SchedulerConfig.load().aging_step is None


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"frobnicate": 1}, "frobnicate"),
        ({"quantum": 0}, "quantum"),
        ({"quantum": math.nan}, "quantum"),
        ({"quantum": math.inf}, "quantum"),
        ({"aging_step": 0}, "aging_step"),
        ({"aging_cap": -1}, "aging_cap"),
        ({"aging_cap": 1001}, "aging_cap"),
        ({"replan_interval": 0.1}, "replan_interval"),
        ({"reconcile_interval": 3601}, "reconcile_interval"),
        ({"dispatch_stale_after": 0.5}, "dispatch_stale_after"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 101}, "max_attempts"),
        ({"backoff_base": -1}, "backoff_base"),
        ({"backoff_base": "5"}, "backoff_base"),
        ({"retry_budget_share": 1.5}, "retry_budget_share"),
        ({"budget": 12, "backoff_ceiling": 5, "backoff_base": 6}, "backoff_ceiling"),
        ({"backoff_ceiling": 1}, "backoff_ceiling"),  # below the current base of 10
        ({"budget": 12, "max_attempts": False}, "max_attempts"),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_written(values: dict[str, Any], field: str) -> None:
    before = SchedulerConfig.load()
    with pytest.raises(InvalidInput) as error:
        services.scheduler_config_set(actor=ACTOR, **values)
    assert error.value.field == field
    after = SchedulerConfig.load()
    assert (after.budget, after.backoff_ceiling, after.quantum) == (before.budget, before.backoff_ceiling, 1.0)
    assert not ConfigChange.objects.exists()


def test_a_change_is_announced_after_commit(announced: Announcements, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.budget_set(budget=8, actor=ACTOR)
        assert announced.replans == 0
    assert len(callbacks) == 1
    message = {"kind": "config", "org": None, "actor": ACTOR.name, "fields": ["budget"]}
    assert announced.broadcasts == [(STAFF_GROUP, message)]
    assert announced.replans == 1
    with django_capture_on_commit_callbacks() as callbacks:
        services.budget_set(budget=8, actor=ACTOR)
    assert callbacks == []


# the admin


@pytest.fixture
def staff_client(client: Client, tenants: Tenants) -> Client:
    client.force_login(tenants.staff)
    return client


def test_the_admin_list_is_the_one_change_page(staff_client: Client) -> None:
    response = staff_client.get(reverse("admin:knobs_schedulerconfig_changelist"))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:knobs_schedulerconfig_change", args=[1])
    assert staff_client.get(reverse("admin:knobs_schedulerconfig_add")).status_code == 403
    assert staff_client.get(reverse("admin:knobs_schedulerconfig_delete", args=[1])).status_code == 403


def test_an_admin_change_goes_through_the_service(staff_client: Client) -> None:
    url = reverse("admin:knobs_schedulerconfig_change", args=[SchedulerConfig.load().pk])
    data = change_form_data(staff_client.get(url))
    data.update(budget="8", max_attempts="4")
    assert staff_client.post(url, data).status_code == 302
    config = SchedulerConfig.load()
    assert (config.budget, config.max_attempts) == (8, 4)
    assert sorted(changes()) == [(ACTOR.name, "budget", "10", "8"), (ACTOR.name, "max_attempts", "3", "4")]
    response = staff_client.get(reverse("admin:knobs_configchange_changelist"))
    assert response.status_code == 200
    assert "user:stella" in response.content.decode()


def test_an_admin_change_refused_by_the_service_writes_nothing(staff_client: Client) -> None:
    url = reverse("admin:knobs_schedulerconfig_change", args=[SchedulerConfig.load().pk])
    data = change_form_data(staff_client.get(url))
    data.update(budget="8", replan_interval="0.1")
    response = staff_client.post(url, data, follow=True)
    shown = messages_of(response)
    assert any("replan_interval must be" in message for message in shown)
    assert not any("successfully" in message for message in shown)
    assert SchedulerConfig.load().budget == 10
    assert not ConfigChange.objects.exists()


def test_a_budget_set_while_the_form_was_open_survives_a_max_attempts_edit(staff_client: Client) -> None:
    url = reverse("admin:knobs_schedulerconfig_change", args=[SchedulerConfig.load().pk])
    data = change_form_data(staff_client.get(url))
    services.scheduler_config_set(actor=Actor("user:oscar", staff=True), budget=7)
    data["max_attempts"] = "4"
    assert staff_client.post(url, data).status_code == 302
    config = SchedulerConfig.load()
    assert (config.budget, config.max_attempts) == (7, 4)
    assert changes() == [("user:oscar", "budget", "10", "7"), (ACTOR.name, "max_attempts", "3", "4")]


def test_a_budget_set_while_the_form_was_open_refuses_the_budget_edit(staff_client: Client) -> None:
    url = reverse("admin:knobs_schedulerconfig_change", args=[SchedulerConfig.load().pk])
    data = change_form_data(staff_client.get(url))
    services.scheduler_config_set(actor=Actor("user:oscar", staff=True), budget=7)
    data.update(budget="8", max_attempts="4")
    response = staff_client.post(url, data)
    assert response.status_code == 200
    errors: Any = response.context["adminform"].form.errors
    assert list(errors) == ["budget"]
    assert "changed by someone else since you opened this page: it is now 7" in errors["budget"][0]
    config = SchedulerConfig.load()
    assert (config.budget, config.max_attempts) == (7, 3)
    assert changes() == [("user:oscar", "budget", "10", "7")]


def test_a_backoff_ceiling_below_the_base_is_a_form_error(staff_client: Client) -> None:
    url = reverse("admin:knobs_schedulerconfig_change", args=[SchedulerConfig.load().pk])
    data = change_form_data(staff_client.get(url))
    data.update(backoff_base="30", backoff_ceiling="20")
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert SchedulerConfig.load().backoff_ceiling == 600
    assert not ConfigChange.objects.exists()


def test_the_config_admin_refuses_a_plain_user(client: Client, tenants: Tenants) -> None:
    client.force_login(tenants.member_a)
    response = client.get(reverse("admin:knobs_schedulerconfig_change", args=[1]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
