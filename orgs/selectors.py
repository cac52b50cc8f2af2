"""Reads on orgs shared by the portal and the API, always within a caller's orgs.

`org_ids` is the set of orgs a caller may see; None means every org (staff). Rows outside it are
reported as missing, never as forbidden, so a refusal does not confirm that they exist.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Prefetch, Q, QuerySet

from charts.models import Chart, ChartState
from common.errors import InvalidInput, NotFound
from orgs.models import Membership, Org, Provider, ProviderPause, Workflow, WorkflowCost

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
    return Org.objects.get(pk=only)


def member_org(*, user_id: int, slug: str) -> Org:
    """One org the user belongs to, by slug; NotFound for any other (existing or not)."""
    org = Org.objects.filter(slug=slug, memberships__user_id=user_id).first()
    if org is None:
        raise NotFound("org not found", field="org")
    return org


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


def member_org_ids(*, user_id: int) -> frozenset[int]:
    return frozenset(Membership.objects.filter(user_id=user_id).values_list("org_id", flat=True))


@dataclass(frozen=True)
class OrgSummary:
    """An org as its members see it: counts of its charts per state and its predicted clear-time."""

    org: Org
    counts: dict[str, int]
    clear_at: datetime | None

    @property
    def waiting(self) -> int:
        return self.counts[ChartState.QUEUED] + self.counts[ChartState.RETRY_WAIT] + self.counts[ChartState.PAUSED]


def org_summary(*, org: Org) -> OrgSummary:
    """One grouped query over the org's charts; every state is present, zero when it has none."""
    counts = dict.fromkeys(ChartState.values, 0)
    rows = Chart.objects.filter(org=org).order_by().values_list("state").annotate(n=Count("id"))
    for state, n in rows:
        counts[state] = n
    return OrgSummary(org=org, counts=counts, clear_at=org.clear_at)


def workflow_costs(*, org: Org) -> QuerySet[WorkflowCost]:
    return WorkflowCost.objects.filter(org=org).select_related("workflow").order_by("workflow__name")


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
