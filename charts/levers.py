"""The chart levers as pure functions: what a reprioritization makes of a waiting chart, written once.

`charts.services.chart_prioritize` writes what `prioritized` returns (under the chart's lock, with
its history line); `scheduling.what_if` lays it over its copy of the queue. Nothing here reads or
writes the database.
"""

from __future__ import annotations

from typing import Any

from common.bounds import Whole
from common.errors import Forbidden, InvalidInput

PRIORITY = Whole(-1000, 1000)
# A tenant's priority only reorders its own charts inside its share, in a narrower range; staff keep
# PRIORITY and the high-priority tier (the operators' lever).
TENANT_PRIORITY = Whole(-10, 10)


def tenant_levers_refused(*, high_priority: object = None, priority: object = None) -> dict[str, list[str]]:
    """What only staff may ask for, by field: the high-priority tier, or a priority outside
    TENANT_PRIORITY. A value that no one may set (not a bool, past PRIORITY) is left to validation:
    400, not 403."""
    refused: dict[str, list[str]] = {}
    if high_priority is True:
        refused["high_priority"] = ["only operators (staff) may set high_priority; it jumps every org's share"]
    low, high = TENANT_PRIORITY.minimum, TENANT_PRIORITY.maximum
    if isinstance(priority, bool) or not isinstance(priority, int):
        return refused
    if PRIORITY.minimum <= priority <= PRIORITY.maximum and not low <= priority <= high:
        refused["priority"] = [
            f"tenants may set priority from {low} to {high} (it orders the org's own charts); only staff go beyond"
        ]
    return refused


def prioritized(
    *, high_priority: object = None, priority: object = None, staff: bool, field: str | None = None
) -> dict[str, Any]:
    """The fields a reprioritization sets: `high_priority` and/or `priority` (None: left as it is).

    1. At least one is given, `high_priority` a bool, `priority` within PRIORITY (400).
    2. For a tenant (`staff` false), the first of `tenant_levers_refused` (403).
    Errors name the lever's own field, or `field` when given (the what-if's `priorities`).
    """
    if high_priority is None and priority is None:
        raise InvalidInput("give high_priority or priority", field=field or "high_priority")
    if high_priority is not None and not isinstance(high_priority, bool):
        raise InvalidInput("high_priority must be true or false", field=field or "high_priority")
    if priority is not None:
        PRIORITY.check(priority, field=field or "priority")
    if not staff:
        refused = tenant_levers_refused(high_priority=high_priority, priority=priority)
        if refused:
            name, messages = next(iter(refused.items()))
            raise Forbidden(messages[0], field=field or name)
    fields: dict[str, Any] = {}
    if high_priority is not None:
        fields["high_priority"] = high_priority
    if priority is not None:
        fields["priority"] = priority
    return fields
