"""Reads on orgs shared by the portal and the API, always within a caller's orgs.

`org_ids` is the set of orgs a caller may see; None means every org (staff). Rows outside it are
reported as missing, never as forbidden, so a refusal does not confirm that they exist.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Prefetch, Q, QuerySet

from common.errors import InvalidInput, NotFound
from common.rows import instances_where
from orgs.levers import Override, Target, targets_effective
from orgs.models import Membership, Org, Provider, ProviderPause, ViewerZone, Workflow, WorkflowCost, WorkflowTurnaround

OrgIds = Collection[int] | None


def orgs_visible(*, org_ids: OrgIds) -> QuerySet[Org]:
    orgs = Org.objects.all()
    return orgs if org_ids is None else orgs.filter(pk__in=list(org_ids))


def org_get(*, org_ids: OrgIds, slug: str) -> Org:
    """One org by slug, or NotFound if it does not exist or lies outside the caller's orgs."""
    org = orgs_visible(org_ids=org_ids).filter(slug=slug).first()
    if org is None:
        raise NotFound("org not found", field="org")
    return org


def org_for_input(*, org_ids: OrgIds, slug: str | None) -> Org:
    """The org a write names in its body; unknown and foreign slugs get the same 400.

    With no slug, the caller's only org is implied (an org token, a member of one org)."""
    if slug:
        org = orgs_visible(org_ids=org_ids).filter(slug=slug).first()
        if org is None:
            raise InvalidInput(f"unknown org {slug!r}", field="org")
        return org
    if org_ids is None or len(org_ids) != 1:
        raise InvalidInput("org is required: name the org's slug", field="org")
    (only,) = org_ids
    # One constant statement (`common/rows.py`): every submission by an org token comes this way.
    found = instances_where(Org, 't."id" = %s', [only])
    if not found:
        raise Org.DoesNotExist(f"org {only} does not exist")
    return found[0]


def membership_get(*, user_id: int, slug: str) -> Membership:
    """The user's membership in an org, by the org's slug, with the org; NotFound for any org the user
    is not in (existing or not)."""
    membership = Membership.objects.select_related("org").filter(user_id=user_id, org__slug=slug).first()
    if membership is None:
        raise NotFound("org not found", field="org")
    return membership


def member_orgs(*, user_id: int) -> list[Org]:
    """The orgs a user belongs to, by name: the portal's org switcher."""
    return list(Org.objects.filter(memberships__user_id=user_id).order_by("name", "id").only("id", "slug", "name"))


def workflow_costs(*, org: Org) -> QuerySet[WorkflowCost]:
    return WorkflowCost.objects.filter(org=org).select_related("workflow").order_by("workflow__name")


def workflow_cost_get(*, org: Org, workflow: Workflow, for_update: bool = False) -> WorkflowCost:
    """The org's override of what one run of `workflow` costs; without one, an unsaved row with no
    cost (the workflow's default applies). `for_update` locks the org first, as `workflow_cost_set`
    does, so the override read stays the stored one until the transaction ends."""
    if for_update:
        Org.objects.select_for_update().filter(pk=org.pk).first()
    found = WorkflowCost.objects.filter(org=org, workflow=workflow).select_related("workflow").first()
    return found or WorkflowCost(org=org, workflow=workflow)  # cost unset: None


def workflow_turnarounds(*, org: Org) -> QuerySet[WorkflowTurnaround]:
    return WorkflowTurnaround.objects.filter(org=org).select_related("workflow").order_by("workflow__name")


def workflow_turnaround_get(*, org: Org, workflow: Workflow, for_update: bool = False) -> WorkflowTurnaround:
    """The org's turnaround promise for `workflow`; without one, an unsaved row with no turnaround (the
    org's applies). `for_update` locks the org first, as `workflow_turnaround_set` does."""
    if for_update:
        Org.objects.select_for_update().filter(pk=org.pk).first()
    found = WorkflowTurnaround.objects.filter(org=org, workflow=workflow).select_related("workflow").first()
    return found or WorkflowTurnaround(org=org, workflow=workflow)  # turnaround unset: None


def turnaround_targets(*, org: Org, workflow_ids: Collection[int]) -> dict[int, Target | None]:
    """The promise each of the workflows' charts is held to in `org` (`orgs.levers.target_effective`:
    the workflow's override, else the org's turnaround, else None), in one query."""
    ids = list(workflow_ids)
    rows = WorkflowTurnaround.objects.filter(org_id=org.pk, workflow_id__in=ids).values_list(
        "workflow_id", "turnaround", "share"
    )
    overrides = {workflow_id: Override(turnaround, share) for workflow_id, turnaround, share in rows}
    return targets_effective(org, overrides, ids)


def provider_pauses(*, active_only: bool, now: datetime) -> QuerySet[ProviderPause]:
    pauses = ProviderPause.objects.select_related("provider", "org")
    return pauses.filter(until__gt=now) if active_only else pauses


def providers_visible(*, org_ids: OrgIds, now: datetime) -> QuerySet[Provider]:
    """Every provider, by slug, with `pauses_in_force`: its pauses still in force at `now` that apply
    to the caller, those for everyone and those of the caller's orgs (every pause for staff), never
    another org's. One query for the providers and one for the pauses, whatever their number."""
    pauses = ProviderPause.objects.filter(until__gt=now).select_related("org").order_by("until", "id")
    if org_ids is not None:
        pauses = pauses.filter(Q(org__isnull=True) | Q(org_id__in=list(org_ids)))
    return Provider.objects.order_by("slug").prefetch_related(Prefetch("pauses", pauses, to_attr="pauses_in_force"))


def provider_get(*, org_ids: OrgIds, now: datetime, slug: str) -> Provider:
    provider = providers_visible(org_ids=org_ids, now=now).filter(slug=slug).first() if "\x00" not in slug else None
    if provider is None:
        raise NotFound("provider not found", field="provider")
    return provider


def workflows_all() -> QuerySet[Workflow]:
    """Every workflow, by name: they are shared by all orgs."""
    return Workflow.objects.select_related("provider").order_by("name")


def workflow_get(*, name: str) -> Workflow:
    workflow = workflows_all().filter(name=name).first() if "\x00" not in name else None
    if workflow is None:
        raise NotFound("workflow not found", field="workflow")
    return workflow


def user_for_input(username: str) -> Any:
    """The user with this username, else a 400 naming the field (users are created in the admin)."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise InvalidInput(f"unknown user {username!r}", field="user")
    return user


def provider_for_input(slug: str | None) -> Provider | None:
    """The provider with this slug (None: none), else a 400 naming the field."""
    if slug is None:
        return None
    provider = Provider.objects.filter(slug=slug).first()
    if provider is None:
        raise InvalidInput(f"unknown provider {slug!r}", field="provider")
    return provider


@dataclass(frozen=True)
class Contact:
    """Whom an org's members ask about their org (a hold, a limit): its first admin with an email."""

    name: str
    email: str


def org_contact(*, org_id: int) -> Contact | None:
    """The org's contact: the admin member who joined first and has an email (their full name, else
    their username); None when no admin has one. One query."""
    membership = (
        Membership.objects.filter(org_id=org_id, role=Membership.Role.ADMIN)
        .exclude(user__email="")
        .select_related("user")
        .order_by("created_at", "id")
        .first()
    )
    if membership is None:
        return None
    user = membership.user
    return Contact(name=user.get_full_name() or user.get_username(), email=user.email)


def viewer_zone(*, user_id: int | None) -> str | None:
    """The zone the user chose to read times in (`viewer_zone_set`), None for the browser's own."""
    if user_id is None:
        return None
    return ViewerZone.objects.filter(user_id=user_id).values_list("zone", flat=True).first()
