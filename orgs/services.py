"""Writes on tenants: weights, holds, caps, queue limits, per-workflow costs, provider pauses.

Every function validates its input, runs in one transaction, records who changed what in the org's
history (`OrgChange`) and, after commit, asks for a replan and tells the live pages. What a lever
makes of the org's row is its pure function in `orgs.levers` (the what-if calls the same ones);
these are operators' levers: a tenant actor is refused (403).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache
from zoneinfo import available_timezones

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from common.actors import Actor
from common.bounds import Whole
from common.errors import Conflict, InvalidInput, NotFound
from common.events import changed
from orgs import levers
from orgs.levers import COST, MAX_CONCURRENCY, QUEUE_LIMIT, WEIGHT
from orgs.models import (
    Membership,
    Org,
    OrgChange,
    Provider,
    ProviderPause,
    ViewerZone,
    Workflow,
    WorkflowCost,
    WorkflowTurnaround,
)

RUN_TIMEOUT = Whole(1, 366 * 86400)
logger = logging.getLogger(__name__)


def _locked(org: Org) -> Org:
    """Re-read the org under a row lock: concurrent edits of one org serialize here."""
    try:
        return Org.objects.select_for_update().get(pk=org.pk)
    except Org.DoesNotExist:
        raise NotFound("org not found", field="org") from None


def org_change_log(org: Org, *, actor: Actor, field: str, old: object, new: object, reason: str) -> None:
    """One line of the org's change history (`OrgChange`), within the caller's transaction."""
    OrgChange.objects.create(
        org=org,
        actor=actor.name,
        field=field,
        old_value="" if old is None else str(old),
        new_value="" if new is None else str(new),
        reason=reason[:500],
    )


def org_create(
    *,
    name: str,
    slug: str | None = None,
    weight: int = 1,
    max_concurrency: int | None = None,
    queue_limit: int | None = None,
    actor: Actor,
) -> Org:
    actor.staff_required(field="org")
    name = (name or "").strip()
    if not name:
        raise InvalidInput("name must not be empty", field="name")
    slug = slugify(slug or name)
    if not slug:
        raise InvalidInput("slug must contain letters or digits", field="slug")
    weight = WEIGHT.check(weight, field="weight")
    max_concurrency = MAX_CONCURRENCY.check_optional(max_concurrency, field="max_concurrency")
    queue_limit = QUEUE_LIMIT.check_optional(queue_limit, field="queue_limit")
    taken = Conflict(f"an org with slug {slug!r} exists already", field="slug")
    with transaction.atomic():
        if Org.objects.filter(slug=slug).exists():
            raise taken
        try:
            with transaction.atomic():  # a concurrent create of the same slug loses here, not with a 500
                org = Org.objects.create(
                    name=name, slug=slug, weight=weight, max_concurrency=max_concurrency, queue_limit=queue_limit
                )
        except IntegrityError:
            raise taken from None
        org_change_log(org, actor=actor, field="created", old=None, new=f"weight {weight}", reason="")
        changed(kind="org", org_id=org.pk)
    return org


def org_weight_set(*, org: Org, weight: int, actor: Actor, reason: str = "", expected: int | None = None) -> Org:
    """Set the org's weight; 0 holds it like `org_hold`, remembering the weight a release restores.

    The reason stays internal: a weight set to 0 shows the org's members no hold reason (`org_hold`'s
    reason is the one written for them). `expected`: the weight the caller saw (a page opened
    earlier); if the stored one is another, by a change made since, nothing is written (Conflict).
    Compared under the org's lock, so no write lands between the comparison and this one."""
    actor.staff_required(field="weight")
    with transaction.atomic():
        org = _locked(org)
        old = org.weight
        if expected is not None and old != expected:
            raise Conflict(
                f"the weight of {org.name} was changed by someone else since you opened this page: it is now "
                f"{old}. Nothing was saved; check the value and save again.",
                field="weight",
            )
        fields = levers.weight_set(org, weight)
        if not fields:
            return org
        _apply(org, {**fields, "hold_reason": ""})
        org_change_log(org, actor=actor, field="weight", old=old, new=weight, reason=reason)
        changed(kind="org", org_id=org.pk)
    return org


def org_hold(*, org: Org, actor: Actor, reason: str = "") -> Org:
    """Hold the org: weight 0, so its charts stay queued and visible but never dispatch.

    The reason is written for the customer: the org's members see it (portal, API) until the release.
    Holding a held org again with another reason replaces the reason its members see."""
    actor.staff_required(field="hold")
    reason = reason[:500]
    with transaction.atomic():
        org = _locked(org)
        if org.is_held:
            if reason and reason != org.hold_reason:
                org.hold_reason = reason
                org.save(update_fields=["hold_reason", "updated_at"])
                # The reason before is the previous hold line's: this line says only that it changed.
                org_change_log(org, actor=actor, field="hold", old="held", new="held", reason=reason)
                changed(kind="org", org_id=org.pk, replan=False)
            return org
        old = org.weight
        _apply(org, {**levers.hold(org), "hold_reason": reason})
        org_change_log(org, actor=actor, field="hold", old=f"weight {old}", new="held", reason=reason)
        changed(kind="org", org_id=org.pk)
    return org


def org_release(*, org: Org, actor: Actor, reason: str = "") -> Org:
    """Release a held org, restoring the weight it had before the hold (1 if it never had one)."""
    actor.staff_required(field="hold")
    with transaction.atomic():
        org = _locked(org)
        fields = levers.release(org)
        if not fields:
            return org
        _apply(org, {**fields, "hold_reason": ""})
        org_change_log(org, actor=actor, field="hold", old="held", new=f"weight {org.weight}", reason=reason)
        changed(kind="org", org_id=org.pk)
    return org


def org_cap_set(*, org: Org, max_concurrency: int | None, actor: Actor, reason: str = "") -> Org:
    actor.staff_required(field="max_concurrency")
    return _org_field_set(org=org, lever=lambda row: levers.cap_set(row, max_concurrency), actor=actor, reason=reason)


def org_queue_limit_set(*, org: Org, queue_limit: int | None, actor: Actor, reason: str = "") -> Org:
    actor.staff_required(field="queue_limit")
    # A queue limit does not move the plan: no replan needed.
    return _org_field_set(
        org=org, lever=lambda row: levers.queue_limit_set(row, queue_limit), actor=actor, reason=reason, replan=False
    )


def org_turnaround_set(*, org: Org, turnaround: int | None, actor: Actor, reason: str = "") -> Org:
    """Promise the org's charts within `turnaround` seconds of submission (None: no promise). Charts
    submitted from now on are due by it; those submitted before keep their due time: no replan."""
    actor.staff_required(field="turnaround", what="turnaround targets")
    return _org_field_set(
        org=org, lever=lambda row: levers.turnaround_set(row, turnaround), actor=actor, reason=reason, replan=False
    )


def org_turnaround_share_set(*, org: Org, share: float | None, actor: Actor, reason: str = "") -> Org:
    """The share of the org's charts promised within its turnaround (None: not said)."""
    actor.staff_required(field="turnaround_share", what="turnaround targets")
    return _org_field_set(
        org=org, lever=lambda row: levers.turnaround_share_set(row, share), actor=actor, reason=reason, replan=False
    )


def _apply(org: Org, fields: dict[str, object]) -> None:
    """Write what a lever (`orgs.levers`) made of the locked org's row."""
    for name, value in fields.items():
        setattr(org, name, value)
    org.save(update_fields=[*fields, "updated_at"])


def _org_field_set(
    *, org: Org, lever: Callable[[Org], levers.Fields], actor: Actor, reason: str, replan: bool = True
) -> Org:
    """Pull a lever of one field on the locked org: write the field it changes, log it, announce it."""
    with transaction.atomic():
        org = _locked(org)
        fields = lever(org)
        if not fields:
            return org
        ((field, value),) = fields.items()
        old = getattr(org, field)
        _apply(org, fields)
        org_change_log(org, actor=actor, field=field, old=old, new=value, reason=reason)
        changed(kind="org", org_id=org.pk, replan=replan)
    return org


def workflow_cost_set(*, org: Org, workflow: Workflow, cost: int | None, actor: Actor, reason: str = "") -> None:
    """Set what one run of `workflow` costs `org`; None removes the override (the default applies)."""
    actor.staff_required(field="cost")
    cost = levers.cost_override_check(cost)
    with transaction.atomic():
        org = _locked(org)
        current = WorkflowCost.objects.filter(org=org, workflow=workflow).first()
        old = current.cost if current else None
        if old == cost:
            return
        if cost is None:
            WorkflowCost.objects.filter(org=org, workflow=workflow).delete()
        else:
            WorkflowCost.objects.update_or_create(org=org, workflow=workflow, defaults={"cost": cost})
        org_change_log(
            org,
            actor=actor,
            field=f"cost:{workflow.name}",
            old=old if old is not None else f"default {workflow.default_cost}",
            new=cost if cost is not None else f"default {workflow.default_cost}",
            reason=reason,
        )
        changed(kind="org", org_id=org.pk)


def workflow_turnaround_set(
    *, org: Org, workflow: Workflow, turnaround: int | None, share: float | None = None, actor: Actor, reason: str = ""
) -> None:
    """Promise the org's charts of `workflow` within `turnaround` seconds, `share` of them (None: the
    org's share); turnaround None removes the override (the org's promise applies). Each field that
    changes is a line of the org's history (`turnaround:<workflow>`, `turnaround_share:<workflow>`).
    Charts submitted before keep their due time: no replan."""
    actor.staff_required(field="turnaround", what="turnaround targets")
    turnaround = None if turnaround is None else levers.turnaround_check(turnaround)
    share = None if turnaround is None else levers.turnaround_share_check(share)
    with transaction.atomic():
        org = _locked(org)
        current = WorkflowTurnaround.objects.filter(org=org, workflow=workflow).first()
        old = (current.turnaround, current.share) if current else (None, None)
        if old == (turnaround, share):
            return
        if turnaround is None:
            WorkflowTurnaround.objects.filter(org=org, workflow=workflow).delete()
        else:
            WorkflowTurnaround.objects.update_or_create(
                org=org, workflow=workflow, defaults={"turnaround": turnaround, "share": share}
            )
        for name, before, after in (("turnaround", old[0], turnaround), ("turnaround_share", old[1], share)):
            if before != after:
                org_change_log(
                    org,
                    actor=actor,
                    field=f"{name}:{workflow.name}",
                    old="org's" if before is None else before,
                    new="org's" if after is None else after,
                    reason=reason,
                )
        changed(kind="org", org_id=org.pk, replan=False)


WORKFLOW_FIELDS = (
    "name", "workflow_type", "task_queue", "default_cost", "run_timeout", "initial_duration", "provider", "params",
)  # fmt: skip


def _text(value: object, *, field: str, max_length: int = 200) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    value = value.strip()
    if len(value) > max_length or "\x00" in value:
        raise InvalidInput(f"{field} must be at most {max_length} characters, without NUL", field=field)
    return value


def _workflow_values(values: dict[str, object]) -> dict[str, object]:
    """Check the given workflow fields as one rule for the admin and the API (any subset of `WORKFLOW_FIELDS`)."""
    cleaned: dict[str, object] = {}
    for field, value in values.items():
        if field in {"name", "workflow_type", "task_queue"}:
            cleaned[field] = _text(value, field=field)
        elif field == "default_cost":
            cleaned[field] = COST.check(value, field=field)
        elif field in {"run_timeout", "initial_duration"}:
            cleaned[field] = RUN_TIMEOUT.check_optional(value, field=field)
        elif field == "provider":
            if value is not None and not isinstance(value, Provider):
                raise InvalidInput("provider must be a provider or null", field=field)
            cleaned[field] = value
        elif field == "params":
            if not isinstance(value, dict):
                raise InvalidInput("params must be an object", field=field)
            cleaned[field] = value
        else:
            raise InvalidInput(f"unknown workflow field {field!r}", field=field)
    return cleaned


def _workflow_saved(workflow: Workflow, *, fields: list[str] | None) -> Workflow:
    """Save (all fields when `fields` is None: a new row); a name taken meanwhile is a 409, not a 500."""
    try:
        with transaction.atomic():
            workflow.save(update_fields=fields)
    except IntegrityError:
        raise Conflict(f"a workflow named {workflow.name!r} exists already", field="name") from None
    return workflow


def workflow_register(
    *,
    name: str,
    workflow_type: str,
    task_queue: str,
    default_cost: int = 1,
    run_timeout: int | None = None,
    initial_duration: int | None = None,
    provider: Provider | None = None,
    params: dict[str, object] | None = None,
    actor: Actor,
) -> Workflow:
    """Register a kind of chart: the Temporal workflow type it starts, its task queue and terms.

    A name in use is a conflict (409). Nothing is queued under it yet, so no replan is needed.
    """
    actor.staff_required(field="workflow")
    values = _workflow_values(
        {
            "name": name,
            "workflow_type": workflow_type,
            "task_queue": task_queue,
            "default_cost": default_cost,
            "run_timeout": run_timeout,
            "initial_duration": initial_duration,
            "provider": provider,
            "params": {} if params is None else params,
        }
    )
    with transaction.atomic():
        if Workflow.objects.filter(name=values["name"]).exists():
            raise Conflict(f"a workflow named {values['name']!r} exists already", field="name")
        workflow = _workflow_saved(Workflow(**values), fields=None)
        changed(kind="workflow", workflow=workflow.pk, replan=False)
    logger.info("workflow %s registered by %s", workflow.name, actor)
    return workflow


def workflow_change(*, workflow: Workflow, actor: Actor, **values: object) -> Workflow:
    """Change any of a workflow's `WORKFLOW_FIELDS` at once; all are checked before anything is written.

    A new cost, provider or initial duration moves the plan (replan); a new run timeout, type, task
    queue or params apply to runs started from now on (Temporal fixes a run's timeout when it starts).
    """
    actor.staff_required(field="workflow")
    cleaned = _workflow_values(values)
    with transaction.atomic():
        workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
        moved = [field for field, value in cleaned.items() if getattr(workflow, field) != value]
        if not moved:
            return workflow
        if "name" in moved and Workflow.objects.filter(name=cleaned["name"]).exclude(pk=workflow.pk).exists():
            raise Conflict(f"a workflow named {cleaned['name']!r} exists already", field="name")
        old = {field: getattr(workflow, field) for field in moved}
        for field in moved:
            setattr(workflow, field, cleaned[field])
        _workflow_saved(workflow, fields=moved)
        changed(
            kind="workflow",
            workflow=workflow.pk,
            replan=bool({"default_cost", "provider", "initial_duration"} & set(moved)),
        )
    for field in moved:
        logger.info("workflow %s: %s %s -> %s by %s", workflow.name, field, old[field], cleaned[field], actor)
    return workflow


def membership_create(*, user: User, org: Org, role: str, actor: Actor) -> Membership:
    """Make `user` a member of `org` with `role`; already a member is a conflict (409). Logged in the
    org's history."""
    actor.staff_required(field="user")
    if role not in Membership.Role.values:
        raise InvalidInput(f"role must be one of {', '.join(Membership.Role.values)}, got {role!r}", field="role")
    taken = Conflict(f"{user} is a member of {org.slug} already", field="user")
    with transaction.atomic():
        org = _locked(org)
        if Membership.objects.filter(user=user, org=org).exists():
            raise taken
        membership = Membership.objects.create(user=user, org=org, role=role)
        org_change_log(org, actor=actor, field="member", old=None, new=f"{user} ({role})", reason="")
        changed(kind="org", org_id=org.pk, replan=False)
    return membership


def membership_role_set(*, membership: Membership, role: str, actor: Actor) -> Membership:
    """Change a member's role (a viewer reads only); logged in the org's history."""
    actor.staff_required(field="role")
    if role not in Membership.Role.values:
        raise InvalidInput(f"role must be one of {', '.join(Membership.Role.values)}, got {role!r}", field="role")
    with transaction.atomic():
        org = _locked(membership.org)
        current = Membership.objects.select_related("user").filter(pk=membership.pk).first()
        if current is None:
            raise NotFound("membership not found", field="user")
        if current.role == role:
            return current
        old, current.role = current.role, role
        current.save(update_fields=["role"])
        org_change_log(
            org, actor=actor, field="member", old=f"{current.user} ({old})", new=f"{current.user} ({role})", reason=""
        )
        changed(kind="org", org_id=org.pk, replan=False)
    return current


def membership_remove(*, membership: Membership, actor: Actor) -> None:
    """Remove a member: their session and their tokens for the org stop reaching it at once."""
    actor.staff_required(field="user")
    with transaction.atomic():
        org = _locked(membership.org)
        current = Membership.objects.select_related("user").filter(pk=membership.pk).first()
        if current is None:
            raise NotFound("membership not found", field="user")
        current.delete()
        org_change_log(org, actor=actor, field="member", old=f"{current.user} ({current.role})", new=None, reason="")
        changed(kind="org", org_id=org.pk, replan=False)


@cache
def zone_names() -> list[str]:
    """The IANA time zone names, sorted: the zones a user may read times in."""
    return sorted(available_timezones())


@cache
def _zone_set() -> frozenset[str]:
    return frozenset(zone_names())


def viewer_zone_set(*, user: User, zone: str | None) -> str | None:
    """The zone `user` reads times in, on every page and browser of theirs: an IANA zone name
    ("Europe/Berlin"), or None (or "") for the browser's own. Answers the zone now kept."""
    if not zone:
        ViewerZone.objects.filter(user=user).delete()
        return None
    if zone not in _zone_set():
        raise InvalidInput(
            f"zone must be an IANA time zone name such as Europe/Berlin, got {zone[:64]!r}", field="zone"
        )
    ViewerZone.objects.update_or_create(user=user, defaults={"zone": zone})
    return zone


def provider_pause(
    *, provider: Provider, until: datetime, org: Org | None = None, actor: Actor, reason: str = ""
) -> ProviderPause:
    """Pause a provider until `until`, for everyone or for one org. Its charts wait; others go on."""
    actor.staff_required(field="provider")
    until = levers.pause_until_check(until, now=timezone.now())
    with transaction.atomic():
        pause = ProviderPause.objects.create(
            provider=provider, org=org, until=until, reason=reason[:500], created_by=actor.name
        )
        if org is not None:
            org_change_log(
                org, actor=actor, field=f"provider:{provider.slug}", old="", new=f"paused until {until}", reason=reason
            )
        changed(kind="provider", org_id=org.pk if org else None, provider=provider.slug)
    return pause


def provider_throttle_record(
    *, provider: Provider, org: Org, until: datetime, actor: Actor, reason: str = ""
) -> list[ProviderPause]:
    """A provider throttled a run of `org`: pause it for that org, and for everyone when the limit is
    evidently the provider's own. Returns the pauses written. Steps:

    1. Lock the provider's row, so that two reconcilers recording throttles at once count each other.
    2. Pause the provider for `org` until `until`.
    3. Count the distinct orgs whose throttle pauses (those written by `actor`) of this provider began
       within the last FAIRSCHED_THROTTLE_SPREAD_WINDOW seconds, this one included.
    4. At FAIRSCHED_THROTTLE_SPREAD_ORGS or more, a provider-wide limit is not one tenant's fault:
       pause the provider for everyone until `until`, unless a pause for everyone already lasts as long.
    """
    actor.staff_required(field="provider")
    with transaction.atomic():
        Provider.objects.select_for_update().get(pk=provider.pk)
        pauses = [provider_pause(provider=provider, org=org, until=until, actor=actor, reason=reason)]
        since = timezone.now() - timedelta(seconds=settings.FAIRSCHED_THROTTLE_SPREAD_WINDOW)
        throttled_orgs = (
            ProviderPause.objects.filter(
                provider=provider, org__isnull=False, created_by=actor.name, created_at__gte=since
            )
            .values("org")
            .distinct()
            .count()
        )
        covered = ProviderPause.objects.filter(provider=provider, org__isnull=True, until__gte=until).exists()
        if throttled_orgs >= settings.FAIRSCHED_THROTTLE_SPREAD_ORGS and not covered:
            pauses.append(
                provider_pause(
                    provider=provider,
                    until=until,
                    actor=actor,
                    reason=f"throttled {throttled_orgs} orgs within {settings.FAIRSCHED_THROTTLE_SPREAD_WINDOW:g} s",
                )
            )
    return pauses


def provider_resume(*, provider: Provider, org: Org | None = None, actor: Actor, reason: str = "") -> int:
    """End the provider's current pauses for one org, or its pause for everyone when org is None."""
    actor.staff_required(field="provider")
    now = timezone.now()
    with transaction.atomic():
        ended = ProviderPause.objects.filter(provider=provider, org=org, until__gt=now).update(until=now)
        if ended:
            if org is not None:
                org_change_log(
                    org, actor=actor, field=f"provider:{provider.slug}", old="paused", new="resumed", reason=reason
                )
            changed(kind="provider", org_id=org.pk if org else None, provider=provider.slug)
    return ended


def provider_get_or_create(*, slug: str, name: str | None = None) -> Provider:
    slug = slugify(slug)
    if not slug:
        raise InvalidInput("provider must contain letters or digits", field="provider")
    provider, _ = Provider.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    return provider
