"""Writes on the scheduler's configuration: budget, policy, aging, pass intervals, retry policy."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from django.db import transaction

from fairsched.errors import InvalidInput
from fairsched.events import changed
from scheduling.models import ConfigChange, SchedulerConfig

MAX_BUDGET = 1_000_000


def budget_set(*, budget: int, actor: str) -> SchedulerConfig:
    """Set the total budget. Lowering it below what runs preempts nothing: dispatch waits for the drain."""
    return scheduler_config_set(actor=actor, budget=budget)


def policy_set(*, policy: str, actor: str, quantum: float | None = None) -> SchedulerConfig:
    values: dict[str, Any] = {"policy": policy}
    if quantum is not None:
        values["quantum"] = quantum
    return scheduler_config_set(actor=actor, **values)


def _number(value: object, *, field: str, minimum: float, strict: bool = False, maximum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{field} must be a number, got {value!r}", field=field)
    if value < minimum or (strict and value == minimum) or (maximum is not None and value > maximum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        if maximum is not None:
            bound += f" and <= {maximum}"
        raise InvalidInput(f"{field} must be {bound}, got {value}", field=field)
    return float(value)


def _whole(value: object, *, field: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be a whole number, got {value!r}", field=field)
    if value < minimum or (maximum is not None and value > maximum):
        raise InvalidInput(f"{field} must be >= {minimum}" + (f" and <= {maximum}" if maximum else ""), field=field)
    return value


VALIDATORS: dict[str, Any] = {
    "budget": lambda v: _whole(v, field="budget", minimum=1, maximum=MAX_BUDGET),
    "quantum": lambda v: _number(v, field="quantum", minimum=0, strict=True),
    "aging_step": lambda v: None if v is None else _number(v, field="aging_step", minimum=0, strict=True),
    "aging_cap": lambda v: _whole(v, field="aging_cap", minimum=0, maximum=1000),
    "replan_interval": lambda v: _number(v, field="replan_interval", minimum=0.5, maximum=3600),
    "reconcile_interval": lambda v: _number(v, field="reconcile_interval", minimum=0.5, maximum=3600),
    "dispatch_stale_after": lambda v: _number(v, field="dispatch_stale_after", minimum=1, maximum=86400),
    "max_attempts": lambda v: _whole(v, field="max_attempts", minimum=1, maximum=100),
    "backoff_base": lambda v: _number(v, field="backoff_base", minimum=0, maximum=86400),
    "backoff_ceiling": lambda v: _number(v, field="backoff_ceiling", minimum=0, maximum=7 * 86400),
    "retry_budget_share": lambda v: _number(v, field="retry_budget_share", minimum=0, maximum=1),
    "arrival_window": lambda v: _number(v, field="arrival_window", minimum=0, maximum=7 * 86400),
}


def scheduler_config_set(*, actor: str, **values: Any) -> SchedulerConfig:
    """Change any of the configuration's fields at once; all are validated before anything is written."""
    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        if name == "policy":
            if value not in SchedulerConfig.Policy.values:
                raise InvalidInput(
                    f"policy must be one of {', '.join(SchedulerConfig.Policy.values)}, got {value!r}", field="policy"
                )
            cleaned[name] = value
        elif name in VALIDATORS:
            cleaned[name] = VALIDATORS[name](value)
        else:
            raise InvalidInput(f"unknown setting {name!r}", field=name)
    with transaction.atomic():
        SchedulerConfig.objects.get_or_create(id=1)
        config = SchedulerConfig.objects.select_for_update().get(id=1)
        changes = [
            ConfigChange(actor=actor, field=name, old_value=str(getattr(config, name)), new_value=str(value))
            for name, value in cleaned.items()
            if getattr(config, name) != value
        ]
        for name, value in cleaned.items():
            setattr(config, name, value)
        if config.backoff_ceiling < config.backoff_base:
            raise InvalidInput("backoff_ceiling must be >= backoff_base", field="backoff_ceiling")
        if not changes:
            return config
        config.save()
        ConfigChange.objects.bulk_create(changes)
        changed(kind="config", actor=actor, fields=sorted(cleaned))
    return config


def plan_preview(*, changes: dict[str, Any]) -> dict[str, Any]:
    """What-if: every org's clear-time now and after the proposed changes, on the current snapshot.

    `changes` may hold `weights` ({org slug: weight}), `budget`, `costs` ([{org, workflow, cost}]),
    `hold` and `release` (lists of org slugs). Nothing is written; bad values and unknown orgs or
    workflows are refused as the real levers refuse them.
    1. Load the snapshot the replan pass would load.
    2. Apply the changes to a copy of its scenario.
    3. Plan both with the core and pair up the clear-times.
    """
    from orgs.models import Org, Workflow
    from scheduling import core
    from scheduling.snapshot import load_snapshot, to_datetime

    if not isinstance(changes, dict):
        raise InvalidInput("changes must be an object", field="changes")
    for name in changes:
        if name not in {"weights", "budget", "costs", "hold", "release"}:
            raise InvalidInput(f"unknown change {name!r}", field=name)
    for name, shape in (("weights", dict), ("costs", list), ("hold", list), ("release", list)):
        if changes.get(name) is not None and not isinstance(changes[name], shape):
            kind = "an object of org slug -> weight" if shape is dict else "a list"
            raise InvalidInput(f"{name} must be {kind}", field=name)
    snapshot = load_snapshot()
    scenario = snapshot.scenario
    key_of = {slug: key for key, slug in snapshot.org_slugs.items()}

    def org_key(slug: object, field: str) -> str:
        if not isinstance(slug, str) or slug not in key_of:
            raise InvalidInput(f"unknown org {slug!r}", field=field)
        return key_of[slug]

    orgs = dict(scenario.orgs)
    for slug, weight in dict(changes.get("weights") or {}).items():
        key = org_key(slug, "weights")
        orgs[key] = replace(orgs[key], weight=_whole(weight, field="weights", minimum=0, maximum=10_000))
    for slug in changes.get("hold") or []:
        key = org_key(slug, "hold")
        orgs[key] = replace(orgs[key], weight=0)
    restore = dict(Org.objects.filter(weight=0).values_list("id", "weight_before_hold"))
    for slug in changes.get("release") or []:
        key = org_key(slug, "release")
        if orgs[key].weight == 0:
            orgs[key] = replace(orgs[key], weight=restore.get(int(key)) or 1)
    budget = scenario.budget
    if "budget" in changes:
        budget = _whole(changes["budget"], field="budget", minimum=1, maximum=MAX_BUDGET)
    queued = core.QueueColumns.of(scenario.queued)
    if changes.get("costs"):
        workflow_ids = dict(Workflow.objects.values_list("name", "id"))
        cost = list(queued.cost)
        for entry in changes["costs"]:
            if not isinstance(entry, dict):
                raise InvalidInput("each cost change must be an object", field="costs")
            key = org_key(entry.get("org"), "costs")
            workflow_id = workflow_ids.get(str(entry.get("workflow")))
            if workflow_id is None:
                raise InvalidInput(f"unknown workflow {entry.get('workflow')!r}", field="costs")
            new_cost = _whole(entry.get("cost"), field="costs", minimum=1, maximum=1_000_000)
            for index, org in enumerate(queued.org):
                if org == key and snapshot.queued_workflow[index] == workflow_id:
                    cost[index] = new_cost
        queued = replace(queued, cost=cost)
    before = core.plan(scenario)
    after = core.plan(replace(scenario, orgs=orgs, budget=budget, queued=queued))

    def stamp(seconds: float | None) -> str | None:
        moment = to_datetime(seconds)
        return moment.isoformat() if moment else None

    return {
        "orgs": {
            snapshot.org_slugs.get(key, key): {
                "before": stamp(before.org_clear.get(key)),
                "after": stamp(after.org_clear.get(key)),
            }
            for key in sorted(before.org_clear.keys() | after.org_clear.keys())
        },
        "global": {"before": stamp(before.global_clear), "after": stamp(after.global_clear)},
    }
