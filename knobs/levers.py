"""The configuration levers as a pure function: what a change makes of the scheduler's configuration.

`config_changes` checks each value against its bound and returns the fields that change; nothing
here reads or writes the database. `knobs.services.scheduler_config_set` writes them (locked,
logged in `ConfigChange`, announced); `scheduling.what_if` plans with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.bounds import Number, Whole
from common.errors import InvalidInput
from knobs.models import SchedulerConfig

# The bounds of every configuration field, for every surface (admin, API, dashboard, what-if):
# `config_changes` checks them (see common.bounds); `aging_step` may also be None (no aging).
BUDGET = Whole(1, 1_000_000)
AGING_CAP = Whole(0, 1000)
MAX_ATTEMPTS = Whole(1, 100)
# The largest budget and org weight a rescue may propose (`rescue_max_budget` may also be None: the
# budget, unchanged); the weight bound is the org lever's (`orgs.levers.WEIGHT`) but for 0, a hold.
RESCUE_MAX_BUDGET = BUDGET
RESCUE_MAX_WEIGHT = Whole(1, 10_000)
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
    "at_risk_threshold": Number(0, 1, above=True),
    "rescue_max_budget": RESCUE_MAX_BUDGET,
    "rescue_max_weight": RESCUE_MAX_WEIGHT,
}
# The settings that may also be None, and what None means.
NULLABLE = {"aging_step": "no aging", "rescue_max_budget": "the budget, unchanged"}
# The settings that are true or false.
SWITCHES = frozenset({"due_first"})


def config_value_check(name: str, value: object) -> Any:
    """One configuration value checked against its bound (None where `NULLABLE` says what it means; a
    switch is true or false)."""
    if name in NULLABLE and value is None:
        return None
    if name in SWITCHES:
        if not isinstance(value, bool):
            raise InvalidInput(f"{name} must be true or false, got {value!r}", field=name)
        return value
    return CONFIG_BOUNDS[name].check(value, field=name)


def config_changes(config: Any, values: Mapping[str, object]) -> dict[str, Any]:
    """The fields of `config` (a `SchedulerConfig`) that `values` change, each checked.

    1. A name that is no setting is refused; `policy` is one of the policies, any other value
       within its bound (`CONFIG_BOUNDS`).
    2. With the change, the backoff ceiling is not below its base.
    3. Only the values that differ from the row's are returned.
    """
    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        if name == "policy":
            if value not in SchedulerConfig.Policy.values:
                choices = ", ".join(SchedulerConfig.Policy.values)
                raise InvalidInput(f"policy must be one of {choices}, got {value!r}", field="policy")
            cleaned[name] = value
        elif name in CONFIG_BOUNDS or name in SWITCHES:
            cleaned[name] = config_value_check(name, value)
        else:
            raise InvalidInput(f"unknown setting {name!r}", field=name)
    base = cleaned.get("backoff_base", config.backoff_base)
    if cleaned.get("backoff_ceiling", config.backoff_ceiling) < base:
        raise InvalidInput("backoff_ceiling must be >= backoff_base", field="backoff_ceiling")
    return {name: value for name, value in cleaned.items() if getattr(config, name) != value}
