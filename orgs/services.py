"""Writes on tenants: weights, holds, caps, queue limits, per-workflow costs, provider pauses.

Every function validates its input, runs in one transaction, records who changed what in the org's
history (`OrgChange`) and, after commit, asks for a replan and tells the live pages.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from fairsched.errors import InvalidInput, NotFound
from fairsched.events import changed
from fairsched.strict import MAX_INT32
from orgs.models import Org, OrgChange, Provider, ProviderPause, Workflow, WorkflowCost

MAX_WEIGHT = 10_000
MAX_RUN_TIMEOUT = 366 * 86400
logger = logging.getLogger(__name__)


def _require_int(value: object, *, field: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be a whole number, got {value!r}", field=field)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidInput(f"{field} must be {bound}, got {value}", field=field)
    return value


def _optional_int(value: object, *, field: str, minimum: int) -> int | None:
    # The columns are PostgreSQL integers: a larger number is refused here, not by the database.
    return None if value is None else _require_int(value, field=field, minimum=minimum, maximum=MAX_INT32)


def _locked(org: Org) -> Org:
    """Re-read the org under a row lock: concurrent edits of one org serialize here."""
    try:
        return Org.objects.select_for_update().get(pk=org.pk)
    except Org.DoesNotExist:
        raise NotFound("org not found", field="org") from None


def _log(org: Org, *, actor: str, field: str, old: object, new: object, reason: str) -> None:
    OrgChange.objects.create(
        org=org,
        actor=actor,
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
    actor: str,
) -> Org:
    name = (name or "").strip()
    if not name:
        raise InvalidInput("name must not be empty", field="name")
    slug = slugify(slug or name)
    if not slug:
        raise InvalidInput("slug must contain letters or digits", field="slug")
    weight = _require_int(weight, field="weight", minimum=0, maximum=MAX_WEIGHT)
    max_concurrency = _optional_int(max_concurrency, field="max_concurrency", minimum=1)
    queue_limit = _optional_int(queue_limit, field="queue_limit", minimum=1)
    with transaction.atomic():
        if Org.objects.filter(slug=slug).exists():
            raise InvalidInput(f"an org with slug {slug!r} exists already", field="slug")
        org = Org.objects.create(
            name=name, slug=slug, weight=weight, max_concurrency=max_concurrency, queue_limit=queue_limit
        )
        _log(org, actor=actor, field="created", old=None, new=f"weight {weight}", reason="")
        changed(kind="org", org_id=org.pk)
    return org


def org_weight_set(*, org: Org, weight: int, actor: str, reason: str = "") -> Org:
    """Set the org's weight; 0 holds it like `org_hold`, remembering the weight a release restores."""
    weight = _require_int(weight, field="weight", minimum=0, maximum=MAX_WEIGHT)
    with transaction.atomic():
        org = _locked(org)
        old = org.weight
        if old == weight:
            return org
        org.weight = weight
        org.weight_before_hold = (old or org.weight_before_hold) if weight == 0 else None
        org.save(update_fields=["weight", "weight_before_hold", "updated_at"])
        _log(org, actor=actor, field="weight", old=old, new=weight, reason=reason)
        changed(kind="org", org_id=org.pk)
    return org


def org_hold(*, org: Org, actor: str, reason: str = "") -> Org:
    """Hold the org: weight 0, so its charts stay queued and visible but never dispatch."""
    with transaction.atomic():
        org = _locked(org)
        if org.is_held:
            return org
        old = org.weight
        org.weight_before_hold, org.weight = old, 0
        org.save(update_fields=["weight", "weight_before_hold", "updated_at"])
        _log(org, actor=actor, field="hold", old=f"weight {old}", new="held", reason=reason)
        changed(kind="org", org_id=org.pk)
    return org


def org_release(*, org: Org, actor: str, reason: str = "") -> Org:
    """Release a held org, restoring the weight it had before the hold (1 if it never had one)."""
    with transaction.atomic():
        org = _locked(org)
        if not org.is_held:
            return org
        org.weight = org.weight_before_hold or 1
        org.weight_before_hold = None
        org.save(update_fields=["weight", "weight_before_hold", "updated_at"])
        _log(org, actor=actor, field="hold", old="held", new=f"weight {org.weight}", reason=reason)
        changed(kind="org", org_id=org.pk)
    return org


def org_cap_set(*, org: Org, max_concurrency: int | None, actor: str, reason: str = "") -> Org:
    max_concurrency = _optional_int(max_concurrency, field="max_concurrency", minimum=1)
    return _org_field_set(org=org, field="max_concurrency", value=max_concurrency, actor=actor, reason=reason)


def org_queue_limit_set(*, org: Org, queue_limit: int | None, actor: str, reason: str = "") -> Org:
    queue_limit = _optional_int(queue_limit, field="queue_limit", minimum=1)
    # A queue limit does not move the plan: no replan needed.
    return _org_field_set(org=org, field="queue_limit", value=queue_limit, actor=actor, reason=reason, replan=False)


def _org_field_set(*, org: Org, field: str, value: int | None, actor: str, reason: str, replan: bool = True) -> Org:
    with transaction.atomic():
        org = _locked(org)
        old = getattr(org, field)
        if old == value:
            return org
        setattr(org, field, value)
        org.save(update_fields=[field, "updated_at"])
        _log(org, actor=actor, field=field, old=old, new=value, reason=reason)
        changed(kind="org", org_id=org.pk, replan=replan)
    return org


def workflow_cost_set(*, org: Org, workflow: Workflow, cost: int | None, actor: str, reason: str = "") -> None:
    """Set what one run of `workflow` costs `org`; None removes the override (the default applies)."""
    cost = _optional_int(cost, field="cost", minimum=1)
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
        _log(
            org,
            actor=actor,
            field=f"cost:{workflow.name}",
            old=old if old is not None else f"default {workflow.default_cost}",
            new=cost if cost is not None else f"default {workflow.default_cost}",
            reason=reason,
        )
        changed(kind="org", org_id=org.pk)


def workflow_run_timeout_set(*, workflow: Workflow, run_timeout: int | None, actor: str) -> Workflow:
    """Set how many seconds a run of `workflow` may take (None: the FAIRSCHED_RUN_TIMEOUT default).

    It applies to runs started from now on: Temporal fixes a run's execution timeout when it starts.
    """
    run_timeout = _optional_int(run_timeout, field="run_timeout", minimum=1)
    if run_timeout is not None and run_timeout > MAX_RUN_TIMEOUT:
        raise InvalidInput(
            f"run_timeout must be at most {MAX_RUN_TIMEOUT} seconds, got {run_timeout}", field="run_timeout"
        )
    with transaction.atomic():
        workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
        old, workflow.run_timeout = workflow.run_timeout, run_timeout
        workflow.save(update_fields=["run_timeout"])
    logger.info("workflow %s: run_timeout %s -> %s by %s", workflow.name, old, run_timeout, actor)
    return workflow


def provider_pause(
    *, provider: Provider, until: datetime, org: Org | None = None, actor: str, reason: str = ""
) -> ProviderPause:
    """Pause a provider until `until`, for everyone or for one org. Its charts wait; others go on."""
    if timezone.is_naive(until):
        raise InvalidInput("until must carry a time zone", field="until")
    if until <= timezone.now():
        raise InvalidInput("until must be in the future", field="until")
    with transaction.atomic():
        pause = ProviderPause.objects.create(
            provider=provider, org=org, until=until, reason=reason[:500], created_by=actor
        )
        if org is not None:
            _log(
                org, actor=actor, field=f"provider:{provider.slug}", old="", new=f"paused until {until}", reason=reason
            )
        changed(kind="provider", org_id=org.pk if org else None, provider=provider.slug)
    return pause


def provider_throttle_record(
    *, provider: Provider, org: Org, until: datetime, actor: str, reason: str = ""
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
    with transaction.atomic():
        Provider.objects.select_for_update().get(pk=provider.pk)
        pauses = [provider_pause(provider=provider, org=org, until=until, actor=actor, reason=reason)]
        since = timezone.now() - timedelta(seconds=settings.FAIRSCHED_THROTTLE_SPREAD_WINDOW)
        throttled_orgs = (
            ProviderPause.objects.filter(provider=provider, org__isnull=False, created_by=actor, created_at__gte=since)
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


def provider_resume(*, provider: Provider, org: Org | None = None, actor: str) -> int:
    """End the provider's current pauses for one org, or its pause for everyone when org is None."""
    now = timezone.now()
    with transaction.atomic():
        ended = ProviderPause.objects.filter(provider=provider, org=org, until__gt=now).update(until=now)
        if ended:
            if org is not None:
                _log(org, actor=actor, field=f"provider:{provider.slug}", old="paused", new="resumed", reason="")
            changed(kind="provider", org_id=org.pk if org else None, provider=provider.slug)
    return ended


def provider_get_or_create(*, slug: str, name: str | None = None) -> Provider:
    slug = slugify(slug)
    if not slug:
        raise InvalidInput("provider must contain letters or digits", field="provider")
    provider, _ = Provider.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    return provider
