"""Writes on tenants: validated, atomic, logged in the org's history, announced only after commit."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from common.actors import Actor
from common.errors import Conflict, InvalidInput, NotFound
from common.events import STAFF_GROUP, org_group
from orgs import services
from orgs.models import Org, OrgChange, ProviderPause, WorkflowCost
from tests.conftest import Announcements, CallerFailed, fail_after
from tests.factories import OrgFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

ACTOR = Actor("user:stella", staff=True)
BAD_WHOLE_NUMBERS = [-1, 1.5, "3", True, None]


def history(org: Org) -> list[tuple[str, str, str, str, str]]:
    """The org's change history, oldest first, as (actor, field, old, new, reason)."""
    rows = OrgChange.objects.filter(org=org).order_by("at", "id")
    return [(c.actor, c.field, c.old_value, c.new_value, c.reason) for c in rows]


# org_create


def test_create_logs_the_birth() -> None:
    org = services.org_create(name=" Acme Corp ", weight=3, max_concurrency=2, queue_limit=50, actor=ACTOR)
    org.refresh_from_db()
    assert (org.name, org.slug, org.weight) == ("Acme Corp", "acme-corp", 3)
    assert (org.max_concurrency, org.queue_limit) == (2, 50)
    assert history(org) == [(ACTOR.name, "created", "", "weight 3", "")]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": "  "}, "name"),
        ({"name": "Acme", "slug": "!!!"}, "slug"),
        ({"name": "Acme", "weight": -1}, "weight"),
        ({"name": "Acme", "weight": "2"}, "weight"),
        ({"name": "Acme", "weight": True}, "weight"),
        ({"name": "Acme", "weight": services.WEIGHT.maximum + 1}, "weight"),
        ({"name": "Acme", "max_concurrency": 0}, "max_concurrency"),
        ({"name": "Acme", "queue_limit": 0}, "queue_limit"),
        ({"name": "Acme", "queue_limit": 2.5}, "queue_limit"),
    ],
)
def test_create_refuses_bad_input(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as error:
        services.org_create(actor=ACTOR, **kwargs)
    assert error.value.field == field
    assert not Org.objects.exists()
    assert not OrgChange.objects.exists()


def test_create_refuses_a_taken_slug() -> None:
    OrgFactory(slug="acme")
    with pytest.raises(Conflict, match="exists already") as error:
        services.org_create(name="Acme", actor=ACTOR)
    assert error.value.field == "slug"
    assert Org.objects.count() == 1


# weight, hold and release


def test_weight_set_changes_the_weight_and_logs_who_and_why() -> None:
    org = OrgFactory(weight=1)
    returned = services.org_weight_set(org=org, weight=5, actor=ACTOR, reason="bigger contract")
    org.refresh_from_db()
    assert returned.weight == org.weight == 5
    assert history(org) == [(ACTOR.name, "weight", "1", "5", "bigger contract")]


@pytest.mark.parametrize("weight", [*BAD_WHOLE_NUMBERS, services.WEIGHT.maximum + 1])
def test_weight_set_refuses_bad_weights(weight: Any) -> None:
    org = OrgFactory(weight=2)
    with pytest.raises(InvalidInput) as error:
        services.org_weight_set(org=org, weight=weight, actor=ACTOR)
    assert error.value.field == "weight"
    assert error.value.as_dict() == {"weight": [error.value.message]}
    org.refresh_from_db()
    assert org.weight == 2
    assert not OrgChange.objects.exists()


def test_weight_set_to_the_same_value_changes_nothing(announced: Announcements) -> None:
    org = OrgFactory(weight=2)
    services.org_weight_set(org=org, weight=2, actor=ACTOR)
    assert not OrgChange.objects.exists()


def test_weight_set_of_an_unknown_org_is_not_found() -> None:
    org = OrgFactory()
    Org.objects.filter(pk=org.pk).delete()
    with pytest.raises(NotFound):
        services.org_weight_set(org=org, weight=3, actor=ACTOR)


def test_weight_zero_holds_and_release_restores_the_weight() -> None:
    org = OrgFactory(weight=4)
    services.org_weight_set(org=org, weight=0, actor=ACTOR)
    org.refresh_from_db()
    assert org.is_held
    assert org.weight_before_hold == 4
    services.org_release(org=org, actor=ACTOR)
    org.refresh_from_db()
    assert (org.weight, org.weight_before_hold) == (4, None)


def test_hold_and_release_restore_the_weight_and_are_logged() -> None:
    org = OrgFactory(weight=3)
    held = services.org_hold(org=org, actor=ACTOR, reason="unpaid invoice")
    assert held.is_held
    org.refresh_from_db()
    assert (org.weight, org.weight_before_hold) == (0, 3)
    services.org_hold(org=org, actor=Actor("user:other", staff=True))  # holding a held org changes nothing
    released = services.org_release(org=org, actor=ACTOR, reason="paid")
    assert released.weight == 3
    services.org_release(org=org, actor=Actor("user:other", staff=True))  # releasing an org that is not held neither
    org.refresh_from_db()
    assert (org.weight, org.weight_before_hold) == (3, None)
    assert history(org) == [
        (ACTOR.name, "hold", "weight 3", "held", "unpaid invoice"),
        (ACTOR.name, "hold", "held", "weight 3", "paid"),
    ]


def test_release_of_an_org_created_held_gives_weight_one() -> None:
    org = OrgFactory(weight=0)
    services.org_release(org=org, actor=ACTOR)
    org.refresh_from_db()
    assert org.weight == 1


def test_a_new_weight_on_a_held_org_releases_it_for_good() -> None:
    org = OrgFactory(weight=3)
    services.org_hold(org=org, actor=ACTOR)
    services.org_weight_set(org=org, weight=2, actor=ACTOR)
    org.refresh_from_db()
    assert (org.weight, org.weight_before_hold) == (2, None)


# caps and queue limits


def test_cap_set_and_clear_are_logged() -> None:
    org = OrgFactory()
    services.org_cap_set(org=org, max_concurrency=2, actor=ACTOR)
    services.org_cap_set(org=org, max_concurrency=2, actor=ACTOR)
    services.org_cap_set(org=org, max_concurrency=None, actor=ACTOR, reason="no cap")
    org.refresh_from_db()
    assert org.max_concurrency is None
    assert history(org) == [
        (ACTOR.name, "max_concurrency", "", "2", ""),
        (ACTOR.name, "max_concurrency", "2", "", "no cap"),
    ]


@pytest.mark.parametrize("value", [0, -1, "2", True, 1.0])
def test_cap_and_queue_limit_refuse_bad_values(value: Any) -> None:
    org = OrgFactory()
    with pytest.raises(InvalidInput) as error:
        services.org_cap_set(org=org, max_concurrency=value, actor=ACTOR)
    assert error.value.field == "max_concurrency"
    with pytest.raises(InvalidInput) as error:
        services.org_queue_limit_set(org=org, queue_limit=value, actor=ACTOR)
    assert error.value.field == "queue_limit"
    assert not OrgChange.objects.exists()


def test_a_queue_limit_is_announced_but_does_not_replan(
    announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    org = OrgFactory()
    with django_capture_on_commit_callbacks(execute=True):
        services.org_queue_limit_set(org=org, queue_limit=10, actor=ACTOR)
    org.refresh_from_db()
    assert org.queue_limit == 10
    assert history(org) == [(ACTOR.name, "queue_limit", "", "10", "")]
    assert [group for group, _ in announced.broadcasts] == [STAFF_GROUP, org_group(org.pk)]
    assert announced.replans == 0


# per-workflow costs


def test_workflow_cost_set_change_and_remove_are_logged() -> None:
    org, workflow = OrgFactory(), WorkflowFactory(name="simulate", default_cost=3)
    services.workflow_cost_set(org=org, workflow=workflow, cost=5, actor=ACTOR)
    assert WorkflowCost.objects.get(org=org, workflow=workflow).cost == 5
    services.workflow_cost_set(org=org, workflow=workflow, cost=5, actor=ACTOR)
    services.workflow_cost_set(org=org, workflow=workflow, cost=2, actor=ACTOR, reason="discount")
    assert WorkflowCost.objects.get(org=org, workflow=workflow).cost == 2
    services.workflow_cost_set(org=org, workflow=workflow, cost=None, actor=ACTOR)
    assert not WorkflowCost.objects.exists()
    services.workflow_cost_set(org=org, workflow=workflow, cost=None, actor=ACTOR)
    assert history(org) == [
        (ACTOR.name, "cost:simulate", "default 3", "5", ""),
        (ACTOR.name, "cost:simulate", "5", "2", "discount"),
        (ACTOR.name, "cost:simulate", "2", "default 3", ""),
    ]


@pytest.mark.parametrize("cost", [0, -2, "2", False, 1.5])
def test_workflow_cost_refuses_bad_costs(cost: Any) -> None:
    org, workflow = OrgFactory(), WorkflowFactory()
    with pytest.raises(InvalidInput) as error:
        services.workflow_cost_set(org=org, workflow=workflow, cost=cost, actor=ACTOR)
    assert error.value.field == "cost"
    assert not WorkflowCost.objects.exists()
    assert not OrgChange.objects.exists()


# providers


def test_provider_get_or_create_slugifies_and_reuses() -> None:
    provider = services.provider_get_or_create(slug="Geo API")
    assert (provider.slug, provider.name) == ("geo-api", "geo-api")
    assert services.provider_get_or_create(slug="geo-api", name="other") == provider
    with pytest.raises(InvalidInput) as error:
        services.provider_get_or_create(slug="  ")
    assert error.value.field == "provider"


def test_provider_pause_for_one_org_is_logged_and_resume_ends_it() -> None:
    org, provider = OrgFactory(), ProviderFactory(slug="geo-api")
    until = timezone.now() + timedelta(minutes=5)
    pause = services.provider_pause(provider=provider, org=org, until=until, actor=ACTOR, reason="429 from geo")
    assert (pause.org, pause.until, pause.created_by, pause.reason) == (org, until, ACTOR.name, "429 from geo")
    assert history(org) == [(ACTOR.name, "provider:geo-api", "", f"paused until {until}", "429 from geo")]
    # The pause for this org does not end a pause for everyone, and vice versa.
    everyone = services.provider_pause(provider=provider, until=until, actor=ACTOR)
    assert services.provider_resume(provider=provider, org=org, actor=ACTOR) == 1
    assert services.provider_resume(provider=provider, org=org, actor=ACTOR) == 0
    assert ProviderPause.objects.filter(until__gt=timezone.now()).get() == everyone
    assert services.provider_resume(provider=provider, actor=ACTOR) == 1
    assert not ProviderPause.objects.filter(until__gt=timezone.now()).exists()
    assert history(org)[-1] == (ACTOR.name, "provider:geo-api", "paused", "resumed", "")


@pytest.mark.parametrize(
    "until",
    [
        datetime(2099, 1, 1),  # naive
        timezone.now() - timedelta(seconds=1),
    ],
)
def test_provider_pause_must_end_in_the_future_with_a_time_zone(until: datetime) -> None:
    with pytest.raises(InvalidInput) as error:
        services.provider_pause(provider=ProviderFactory(), until=until, actor=ACTOR)
    assert error.value.field == "until"
    assert not ProviderPause.objects.exists()


# announcements happen after commit, never for a rolled-back change


def test_changes_are_announced_only_after_commit(
    announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    org = OrgFactory(weight=1)
    with django_capture_on_commit_callbacks() as callbacks:
        services.org_weight_set(org=org, weight=2, actor=ACTOR)
        assert announced.broadcasts == []
        assert announced.replans == 0
    assert len(callbacks) == 1
    callbacks[0]()
    message = {"kind": "org", "org": org.pk}
    assert announced.broadcasts == [(STAFF_GROUP, message), (org_group(org.pk), message)]
    assert announced.replans == 1


def test_a_rolled_back_change_announces_nothing(
    announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    org = OrgFactory(weight=1)
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(CallerFailed):
        fail_after(lambda: services.org_hold(org=org, actor=ACTOR))
    assert callbacks == []
    assert announced.broadcasts == []
    org.refresh_from_db()
    assert org.weight == 1
    assert not OrgChange.objects.exists()


def test_an_unchanged_value_announces_nothing(
    announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    org, workflow = OrgFactory(weight=2, max_concurrency=3), WorkflowFactory()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.org_weight_set(org=org, weight=2, actor=ACTOR)
        services.org_cap_set(org=org, max_concurrency=3, actor=ACTOR)
        services.org_release(org=org, actor=ACTOR)
        services.workflow_cost_set(org=org, workflow=workflow, cost=None, actor=ACTOR)
        services.provider_resume(provider=ProviderFactory(), actor=ACTOR)
    assert callbacks == []
    assert announced.replans == 0
