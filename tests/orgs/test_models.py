"""The database enforces the tenant rules even when a write bypasses the services."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import IntegrityError, transaction

from orgs.models import Membership, Org, OrgChange, ProviderPause, Workflow, WorkflowCost
from tests.conftest import Tenants
from tests.factories import MembershipFactory, OrgFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db


def violates(write: Callable[[], object]) -> None:
    """Run a raw write that the database must refuse, in a savepoint so the test can go on."""
    with pytest.raises(IntegrityError), transaction.atomic():
        write()


def test_weight_below_zero_is_refused_by_the_database() -> None:
    org = OrgFactory()
    violates(lambda: Org.objects.filter(pk=org.pk).update(weight=-1))
    org.refresh_from_db()
    assert org.weight == 1


@pytest.mark.parametrize("field", ["max_concurrency", "queue_limit"])
def test_cap_and_queue_limit_are_empty_or_at_least_one(field: str) -> None:
    org = OrgFactory()
    violates(lambda: Org.objects.filter(pk=org.pk).update(**{field: 0}))
    Org.objects.filter(pk=org.pk).update(**{field: None})
    Org.objects.filter(pk=org.pk).update(**{field: 1})


def test_workflow_default_cost_is_at_least_one() -> None:
    workflow = WorkflowFactory()
    violates(lambda: Workflow.objects.filter(pk=workflow.pk).update(default_cost=0))


def test_org_workflow_cost_is_at_least_one_and_unique_per_pair() -> None:
    org, workflow = OrgFactory(), WorkflowFactory()
    violates(lambda: WorkflowCost.objects.create(org=org, workflow=workflow, cost=0))
    WorkflowCost.objects.create(org=org, workflow=workflow, cost=2)
    violates(lambda: WorkflowCost.objects.create(org=org, workflow=workflow, cost=3))
    WorkflowCost.objects.create(org=OrgFactory(), workflow=workflow, cost=3)


def test_slug_and_workflow_name_are_unique() -> None:
    OrgFactory(slug="same")
    violates(lambda: OrgFactory(slug="same"))
    WorkflowFactory(name="render")
    violates(lambda: Workflow.objects.create(name="render", workflow_type="t", task_queue="q"))


def test_a_user_is_in_an_org_once(tenants: Tenants) -> None:
    violates(lambda: MembershipFactory(user=tenants.member_a, org=tenants.org_a, role=Membership.Role.ADMIN))
    MembershipFactory(user=tenants.member_a, org=tenants.org_b, role=Membership.Role.VIEWER)


def test_held_is_weight_zero() -> None:
    assert OrgFactory(weight=0).is_held
    assert not OrgFactory(weight=1).is_held


@pytest.mark.parametrize(("role", "can_write"), [("viewer", False), ("member", True), ("admin", True)])
def test_only_viewers_cannot_write(tenants: Tenants, role: str, can_write: bool) -> None:
    membership = MembershipFactory(org=tenants.org_b, role=role)
    assert membership.can_write is can_write


def test_names_read_well(tenants: Tenants) -> None:
    provider = ProviderFactory(slug="geo-api", name="Geo API")
    workflow = WorkflowFactory(name="export", provider=provider)
    cost = WorkflowCost.objects.create(org=tenants.org_a, workflow=workflow, cost=4)
    pause = ProviderPause(provider=provider, org=None, until=tenants.org_a.created_at, created_by="user:x")
    change = OrgChange(org=tenants.org_a, actor="user:x", field="weight", old_value="1", new_value="2")
    assert str(tenants.org_a) == "Acme"
    assert str(provider) == "Geo API"
    assert str(cost) == "export for Acme: 4"
    assert str(pause).startswith("Geo API paused for everyone until ")
    pause.org = tenants.org_b
    assert "paused for beta" in str(pause)
    assert str(change) == "Acme: weight 1 -> 2 by user:x"
    assert str(Membership.objects.get(user=tenants.member_a)) == "alice in Acme (member)"
