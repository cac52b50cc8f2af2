"""Writes on the scheduler's configuration: budget, policy, aging, pass intervals, retry policy."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from common.bounds import Number, Whole
from common.errors import InvalidInput
from common.events import changed
from knobs.models import ConfigChange, SchedulerConfig


def budget_set(*, budget: int, actor: str, reason: str = "") -> SchedulerConfig:
    """Set the total budget. Lowering it below what runs preempts nothing: dispatch waits for the drain."""
    return scheduler_config_set(actor=actor, reason=reason, budget=budget)


def policy_set(*, policy: str, actor: str, quantum: float | None = None, reason: str = "") -> SchedulerConfig:
    values: dict[str, Any] = {"policy": policy}
    if quantum is not None:
        values["quantum"] = quantum
    return scheduler_config_set(actor=actor, reason=reason, **values)


# The bounds of every configuration field, for every surface (admin, API, dashboard, what-if):
# `scheduler_config_set` checks them (see common.bounds); `aging_step` may also be None (no aging).
BUDGET = Whole(1, 1_000_000)
AGING_CAP = Whole(0, 1000)
MAX_ATTEMPTS = Whole(1, 100)
CONFIG_BOUNDS: dict[str, Whole | Number] = {
    "budget": BUDGET,
    "quantum": Number(0, above=True),
    "aging_step": Number(0, above=True),
    "aging_cap": AGING_CAP,
    "replan_interval": Number(0.5, 3600),
    "reconcile_interval": Number(0.5, 3600),
    "dispatch_stale_after": Number(1, 86400),
    "max_attempts": MAX_ATTEMPTS,
    "backoff_base": Number(0, 86400),
    "backoff_ceiling": Number(0, 7 * 86400),
    "retry_budget_share": Number(0, 1),
    "arrival_window": Number(0, 7 * 86400),
}


def config_value_check(name: str, value: object) -> Any:
    """One configuration value checked against its bound (None for `aging_step`: no aging)."""
    if name == "aging_step" and value is None:
        return None
    return CONFIG_BOUNDS[name].check(value, field=name)


def scheduler_config_set(*, actor: str, reason: str = "", **values: Any) -> SchedulerConfig:
    """Change any of the configuration's fields at once; all are validated before anything is written.
    Each changed field is a line of the change log (`ConfigChange`), with `reason`."""
    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        if name == "policy":
            if value not in SchedulerConfig.Policy.values:
                raise InvalidInput(
                    f"policy must be one of {', '.join(SchedulerConfig.Policy.values)}, got {value!r}", field="policy"
                )
            cleaned[name] = value
        elif name in CONFIG_BOUNDS:
            cleaned[name] = config_value_check(name, value)
        else:
            raise InvalidInput(f"unknown setting {name!r}", field=name)
    with transaction.atomic():
        SchedulerConfig.objects.get_or_create(id=1)
        config = SchedulerConfig.objects.select_for_update().get(id=1)
        changes = [
            ConfigChange(
                actor=actor, field=name, old_value=str(getattr(config, name)), new_value=str(value), reason=reason[:500]
            )
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
