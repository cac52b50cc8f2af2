"""The org levers as pure functions: what each lever makes of an org's row, written once.

A lever takes the row (an `Org`, or any row with the same fields: the what-if's copies of the
snapshot's rows) and the value asked for, checks the value against its bound (`InvalidInput` naming
`field`), and returns the fields that change: an empty dict when the row already is so. Nothing here
reads or writes the database. `orgs.services` writes what a lever returns (under the org's lock, with
its history line and its announcement); `scheduling.what_if` lays it over its copies and replans.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from common.bounds import Whole
from common.errors import InvalidInput

# The bounds of the org and workflow levers, for every surface (API, admin, what-if): see common.bounds.
WEIGHT = Whole(0, 10_000)
# Charts of an org in flight at once, and in its queue (null: no cap, no limit). The columns are
# PostgreSQL integers: a larger number is refused here, not by the database.
MAX_CONCURRENCY = Whole(1)
QUEUE_LIMIT = Whole(1)
# Budget units one run holds: a workflow's default and an org's override.
COST = Whole(1, 1_000_000)

Fields = dict[str, Any]


class Weighted(Protocol):
    """What the share levers read of a row: its weight (0: held) and the weight a release restores."""

    @property
    def weight(self) -> int: ...

    @property
    def weight_before_hold(self) -> int | None: ...


class Capped(Protocol):
    @property
    def max_concurrency(self) -> int | None: ...


def weight_set(row: Weighted, weight: object, *, field: str = "weight") -> Fields:
    """A new weight; 0 holds the org as `hold` does, remembering the weight a release restores."""
    weight = WEIGHT.check(weight, field=field)
    if row.weight == weight:
        return {}
    before_hold = (row.weight or row.weight_before_hold) if weight == 0 else None
    return {"weight": weight, "weight_before_hold": before_hold}


def hold(row: Weighted) -> Fields:
    """Weight 0, remembering the weight: its charts stay queued and visible but never dispatch."""
    if row.weight == 0:
        return {}
    return {"weight": 0, "weight_before_hold": row.weight}


def release(row: Weighted) -> Fields:
    """Back to the weight before the hold (1 if it never had one); an org not held is left as it is."""
    if row.weight != 0:
        return {}
    return {"weight": row.weight_before_hold or 1, "weight_before_hold": None}


def cap_set(row: Capped, max_concurrency: object, *, field: str = "max_concurrency") -> Fields:
    """At most this many of the org's charts in flight at once; None lifts the cap."""
    cap = MAX_CONCURRENCY.check_optional(max_concurrency, field=field)
    return {} if row.max_concurrency == cap else {"max_concurrency": cap}


class Limited(Protocol):
    @property
    def queue_limit(self) -> int | None: ...


def queue_limit_set(row: Limited, queue_limit: object, *, field: str = "queue_limit") -> Fields:
    """At most this many of the org's charts waiting: new submissions past it are refused (None: no limit)."""
    limit = queue_limit_check(queue_limit, field=field)
    return {} if row.queue_limit == limit else {"queue_limit": limit}


def queue_limit_check(queue_limit: object, *, field: str = "queue_limit") -> int | None:
    """A queue limit checked against its bound."""
    return QUEUE_LIMIT.check_optional(queue_limit, field=field)


def cost_override_check(cost: object, *, field: str = "cost") -> int | None:
    """What one run of a workflow costs the org; None removes the override."""
    return COST.check_optional(cost, field=field)


def cost_charged(override: int | None, *, default: int) -> int:
    """What a run is charged: the org's override of the workflow's cost, else the workflow's default."""
    return default if override is None else override


def pause_until_check(until: datetime, *, now: datetime, field: str = "until") -> datetime:
    """When a provider pause may end: a moment with its time zone, after `now`."""
    if until.tzinfo is None or until.utcoffset() is None:
        raise InvalidInput("until must carry a time zone", field=field)
    if until <= now:
        raise InvalidInput("until must be in the future", field=field)
    return until


def pause_extended(current: datetime | None, until: datetime) -> datetime:
    """A provider's pause after another pause of the same scope until `until`: the later end wins."""
    return until if current is None else max(current, until)
