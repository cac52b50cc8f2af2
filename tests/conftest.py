"""Shared fixtures: the three tenants every cross-tenant check is written against."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import AbstractUser

from orgs.models import Membership, Org, Workflow
from tests.factories import MembershipFactory, OrgFactory, UserFactory, WorkflowFactory


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
