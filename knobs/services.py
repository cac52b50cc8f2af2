"""Writes on the scheduler's configuration: budget, policy, aging, pass intervals, retry policy.

What a change makes of the configuration is `knobs.levers.config_changes` (the what-if,
`scheduling.what_if`, plans with the same function); only operators change it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from common.actors import Actor
from common.events import changed
from knobs.levers import config_changes
from knobs.models import ConfigChange, SchedulerConfig


def budget_set(*, budget: int, actor: Actor, reason: str = "") -> SchedulerConfig:
    """Set the total budget. Lowering it below what runs preempts nothing: dispatch waits for the drain."""
    return scheduler_config_set(actor=actor, reason=reason, budget=budget)


def policy_set(*, policy: str, actor: Actor, quantum: float | None = None, reason: str = "") -> SchedulerConfig:
    values: dict[str, Any] = {"policy": policy}
    if quantum is not None:
        values["quantum"] = quantum
    return scheduler_config_set(actor=actor, reason=reason, **values)


def scheduler_config_set(*, actor: Actor, reason: str = "", **values: Any) -> SchedulerConfig:
    """Change any of the configuration's fields at once; all are validated before anything is written.
    Each changed field is a line of the change log (`ConfigChange`), with `reason`. Staff only."""
    actor.staff_required(field=next(iter(values), "config"))
    with transaction.atomic():
        SchedulerConfig.objects.get_or_create(id=1)
        config = SchedulerConfig.objects.select_for_update().get(id=1)
        fields = config_changes(config, values)
        if not fields:
            return config
        ConfigChange.objects.bulk_create(
            ConfigChange(
                actor=actor.name,
                field=name,
                old_value=str(getattr(config, name)),
                new_value=str(value),
                reason=reason[:500],
            )
            for name, value in fields.items()
        )
        for name, value in fields.items():
            setattr(config, name, value)
        config.save()
        changed(kind="config", actor=actor.name, fields=sorted(fields))
    return config
