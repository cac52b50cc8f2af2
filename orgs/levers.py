"""The org levers as pure functions: what each lever makes of an org's row, written once.

A lever takes the row (an `Org`, or any row with the same fields: the what-if's copies of the
snapshot's rows) and the value asked for, checks the value against its bound (`InvalidInput` naming
`field`), and returns the fields that change: an empty dict when the row already is so. Nothing here
reads or writes the database. `orgs.services` writes what a lever returns (under the org's lock, with
its history line and its announcement); `scheduling.what_if` lays it over its copies and replans.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from common.bounds import Number, Whole
from common.errors import InvalidInput

# The bounds of the org and workflow levers, for every surface (API, admin, what-if): see common.bounds.
WEIGHT = Whole(0, 10_000)
# Charts of an org in flight at once, and in its queue (null: no cap, no limit). The columns are
# PostgreSQL integers: a larger number is refused here, not by the database.
MAX_CONCURRENCY = Whole(1)
QUEUE_LIMIT = Whole(1)
# Budget units one run holds: a workflow's default and an org's override.
COST = Whole(1, 1_000_000)
# Seconds from submission in which a chart is promised (an org's, or its override for one workflow),
# up to a year; and the share of charts promised within it, above 0 and at most 1.
TURNAROUND = Whole(1, 366 * 86400)
TURNAROUND_SHARE = Number(0, 1, above=True)

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


class Promised(Protocol):
    """What the promise levers read of an org's row: its turnaround and the share promised within it."""

    @property
    def turnaround(self) -> int | None: ...

    @property
    def turnaround_share(self) -> float | None: ...


def turnaround_set(row: Promised, turnaround: object, *, field: str = "turnaround") -> Fields:
    """Charts of the org are due this many seconds after submission; None: no promise."""
    seconds = TURNAROUND.check_optional(turnaround, field=field)
    return {} if row.turnaround == seconds else {"turnaround": seconds}


def turnaround_share_set(row: Promised, share: object, *, field: str = "turnaround_share") -> Fields:
    """The share of the org's charts promised within its turnaround ("95% within 24 h"); None: not said."""
    checked = turnaround_share_check(share, field=field)
    return {} if row.turnaround_share == checked else {"turnaround_share": checked}


def turnaround_share_check(share: object, *, field: str = "share") -> float | None:
    return None if share is None else TURNAROUND_SHARE.check(share, field=field)


def turnaround_check(turnaround: object, *, field: str = "turnaround") -> int:
    return TURNAROUND.check(turnaround, field=field)


@dataclass(frozen=True)
class Target:
    """A promise: charts due `turnaround` seconds after submission, `share` of them (None: not said)."""

    turnaround: int
    share: float | None


@dataclass(frozen=True)
class Override:
    """An org's promise for one workflow (`WorkflowTurnaround`): its turnaround, its share (None: the org's)."""

    turnaround: int
    share: float | None


def target_effective(org: Promised, override: Override | None) -> Target | None:
    """The promise a chart of the org is held to: the workflow's override for the org, else the org's
    turnaround, else none. An override without a share takes the org's share."""
    if override is not None:
        share = org.turnaround_share if override.share is None else override.share
        return Target(override.turnaround, share)
    if org.turnaround is None:
        return None
    return Target(org.turnaround, org.turnaround_share)


def targets_effective(org: Promised, overrides: Mapping[int, Override], workflow_ids: Any) -> dict[int, Target | None]:
    """`target_effective` for each of the workflows (by id), given the org's overrides by workflow id."""
    return {workflow_id: target_effective(org, overrides.get(workflow_id)) for workflow_id in workflow_ids}
