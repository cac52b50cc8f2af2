"""The what-if: the plan now and after proposed lever changes, on one snapshot; a read, nothing is written.

Each lever is the same pure function the services write with (`orgs.levers`, `charts.levers`,
`knobs.levers`), laid over copies of the snapshot's rows instead of written; the API's
serializer (`scheduling.api.PlanChangesSerializer`) has checked the shape of the changes and that
the orgs, workflows and providers they name exist, so this module does not check them again.

What every preview of one plan version shares, the snapshot and the plan as it stands, is kept in the
process per version (`what_if_base`): a preview plans only the change. The replan that makes a version
hands its own snapshot and plan over to the web processes through the cache (`base_hand_over`), so
that even the first preview of a version neither reads the queue nor plans it as it stands.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from numpy.typing import NDArray

from charts.levers import prioritized
from common.errors import InvalidInput
from knobs.levers import config_changes
from knobs.models import ConfigChange
from orgs import levers as org_levers
from orgs.models import OrgChange, Provider, Workflow
from scheduling import core
from scheduling.core.model import QUEUED_FIELDS, PlanArrays
from scheduling.core.replay import COMPILED_MIN_CHARTS
from scheduling.models import QueueSample
from scheduling.snapshot import (
    ActiveCharts,
    Costs,
    OrgRow,
    Snapshot,
    aging_of,
    availability,
    backlogged_and_ready,
    fair_service,
    load_costs,
    load_snapshot,
    org_key,
    retry_budget_of,
    to_datetime,
    to_seconds,
)

logger = logging.getLogger(__name__)

# The configuration levers a preview may change (the scenario is built from the configuration).
CONFIG_LEVERS = ("budget", "policy", "quantum", "aging_step", "aging_cap")
# How many charts the preview lists among those that move most.
PREVIEW_TOP_CHARTS = 25


@dataclass
class OrgMoves:
    """How an org's charts move: how many earlier, later, losing their ETA, and the largest moves."""

    earlier: int = 0
    later: int = 0
    unplanned: int = 0
    most_earlier: float = 0.0
    most_later: float = 0.0


class PlanFigures(Protocol):
    """What a what-if and the rescue read of a plan: its rows as arrays (`PlanArrays`) and its
    clear-times. A `core.Plan` is one; so is the plan a replan hands over (`BasePlan`)."""

    @property
    def arrays(self) -> PlanArrays: ...

    @property
    def org_clear(self) -> dict[str, float | None]: ...

    @property
    def global_clear(self) -> float | None: ...


@dataclass(frozen=True)
class BasePlan:
    """A plan as a base handed over keeps it (`base_hand_over`): what `PlanFigures` reads of it."""

    arrays: PlanArrays
    org_clear: dict[str, float | None]
    global_clear: float | None

    @classmethod
    def of(cls, plan: core.Plan) -> BasePlan:
        return cls(plan.arrays, plan.org_clear, plan.global_clear)


@dataclass(frozen=True)
class WhatIfBase:
    """What every what-if of one instant shares: the snapshot, the org rows it was built from (by
    core key), each org's core key by slug, and the plan as things stand (`before`). One what-if
    plans it once; the rescue's search plans it once for all the changes it tries."""

    snapshot: Snapshot
    rows: dict[str, OrgRow]
    key_of: dict[str, str]
    before: PlanFigures

    @classmethod
    def of(cls, snapshot: Snapshot, before: PlanFigures) -> WhatIfBase:
        """The base of `snapshot` and its plan `before`. A large queue is planned by the core's
        compiled replay, loaded into the process on its first what-if (`core.load_compiled_replay`,
        numba's cache; the web process does not load it at start)."""
        if len(snapshot.scenario.queued) >= COMPILED_MIN_CHARTS:
            core.load_compiled_replay()
        rows = snapshot.org_rows
        return cls(snapshot, rows, {row.slug: key for key, row in rows.items()}, before)


@dataclass(frozen=True)
class WhatIfAfter:
    """The plan after proposed changes (`after`), on the scenario they give, with the queued
    columns it planned and the proposed queue limits (by core key)."""

    scenario: core.Scenario
    queued: core.QueueColumns
    queue_limits: dict[str, int | None]
    after: core.Plan


def what_if_base(*, now: datetime | None = None) -> WhatIfBase:
    """Step 1 of `plan_preview`, and the plan before any change (of the snapshot loaded at `now`).

    Without `now`, the base of the plan version as it stands (`plan_version`) is kept in the process
    and shared by every what-if of that version (`_cached_base`): the snapshot and the plan before are
    the same for every change an operator previews, until a replan has run or a lever was pulled.
    With `now`, a base of that instant, read afresh.
    """
    if now is None:
        return _cached_base()
    return _base_loaded(now=now)


def _base_loaded(*, now: datetime | None) -> WhatIfBase:
    """A base read afresh: the snapshot (with the org rows it was built from) and its plan."""
    snapshot = load_snapshot(now=now)
    return WhatIfBase.of(snapshot, core.plan(snapshot.scenario))


# The plan version: the last replan (its queue sample, which every replan writes) and the last lever
# pulled through a service (each logs an org or a configuration change in its own transaction).
_VERSION_TABLES = [model._meta.db_table for model in (QueueSample, OrgChange, ConfigChange)]
_VERSION_SQL = "SELECT " + ", ".join(f'(SELECT max("id") FROM "{table}")' for table in _VERSION_TABLES)  # noqa: S608


def _version_read() -> tuple[int | None, ...]:
    """The last queue sample, org change and configuration change, in one cheap statement (three
    index lookups)."""
    with connection.cursor() as cursor:
        cursor.execute(_VERSION_SQL)
        return tuple(cursor.fetchone() or (None,) * len(_VERSION_TABLES))


def plan_version() -> tuple[int | None, ...] | None:
    """The plan version: the last replan's sample, the last org change and the last configuration
    change; None before the first replan (nothing to key a base by)."""
    version = _version_read()
    return None if version[0] is None else version


def levers_version() -> tuple[int | None, ...]:
    """The plan version's levers part (the last org and configuration changes), which a replan
    reads before its snapshot (`base_hand_over`)."""
    return _version_read()[1:]


@dataclass
class _BaseCache:
    """The last base read (`base`) and the plan version it was read at (`version`)."""

    version: tuple[int | None, ...] | None = None
    base: WhatIfBase | None = None


_base_cache = _BaseCache()
_base_cache_lock = threading.Lock()


def _cached_base() -> WhatIfBase:
    """The base of the plan version as it stands: the one kept since it was had at that version;
    else the one its replan handed over (`_handed_base`), else read now; kept either way. Why per
    version and not per request: loading the snapshot and planning it as it stands is most of a
    what-if's time at a large queue, and between two replans (or two lever changes) every preview
    would read the same thing again. What a version does not see until the next replan: charts
    submitted, started or finished since, a priority set since, and a workflow's default cost or
    provider changed since (the replan that each of those asks for makes the next version). A base is
    immutable (`what_if_after` pulls its levers on copies), so threads share it; two that miss at
    once each get one, the later kept. One base is kept per process (the last)."""
    version = plan_version()
    if version is None:
        return _base_loaded(now=None)
    with _base_cache_lock:
        if _base_cache.version == version and _base_cache.base is not None:
            return _base_cache.base
    base = _handed_base(version) or _base_loaded(now=None)
    with _base_cache_lock:
        _base_cache.version, _base_cache.base = version, base
    return base


@dataclass(frozen=True)
class _HandedBase:
    """What a replan hands over (`base_hand_over`): its snapshot and its plan."""

    snapshot: Snapshot
    before: BasePlan


def _handed_shape() -> str:
    """The shape of what is handed over, as the code of this process has it: the fields of each kind
    of record in it. A key holds it, so that while a deploy runs old and new code side by side, a web
    process never takes a base pickled by a replan whose records had other fields."""
    records: list[type] = [_HandedBase, BasePlan, Snapshot, ActiveCharts, OrgRow, PlanArrays, core.Scenario]
    records += [core.RunningChart, core.OrgPolicy, core.History, core.PastSubmission, core.Aging]
    names = [f"{record.__name__}({','.join(field.name for field in dataclass_fields(record))})" for record in records]
    return hashlib.sha256(";".join([*names, ",".join(QUEUED_FIELDS)]).encode()).hexdigest()[:12]


# The cache key of the base last handed over (`base_hand_over`, step 3).
HANDED_LAST_KEY = "what-if-base:last"


def _handed_key(version: tuple[int | None, ...]) -> str:
    return f"what-if-base:{_HANDED_SHAPE}:" + ":".join(map(str, version))


def base_hand_over(*, version: tuple[int | None, ...], snapshot: Snapshot, plan: core.Plan) -> bool:
    """Hand a replan's snapshot and plan over to the web processes, as the base of plan version
    `version` (the replan's sample, and `levers_version` as read before its snapshot); whether it was
    handed. A replan calls it after its commit. Steps:

    1. Nothing above `FAIRSCHED_WHAT_IF_HANDOVER_MAX_CHARTS` queued charts: the payload grows with the
       queue (`bench/bench_what_if.py`), and so does what it adds to the replan.
    2. Into the cache (Redis, pickled by Django's cache) under the version, for
       `FAIRSCHED_WHAT_IF_HANDOVER_SECONDS`: the snapshot without what the core worked out on its
       queue (`QueueColumns.replace`, the columns as given), and the plan's arrays and clear-times.
    3. The base handed over before it is dropped (`HANDED_LAST_KEY` names it): only the last version
       is previewed, so the cache holds about one payload, not one per replan of the timeout. A web
       process that read the older version just before asks for it in vain and reads its own; two
       hand-overs at once (replans in two workers) may drop the newer one, whose previews read theirs.

    Why it is the version's base: the plan as it stands is the plan of this snapshot (the core's plan
    is a function of it), the one the replan wrote; a lever pulled while the snapshot was read makes
    a version past the one keyed here (its change is logged after `levers_version` was read), whose
    previews read their own base. A cache that fails is logged and the previews read their own."""
    if len(snapshot.scenario.queued) > settings.FAIRSCHED_WHAT_IF_HANDOVER_MAX_CHARTS:
        return False
    queue = core.QueueColumns.of(snapshot.scenario.queued).replace()
    handed = _HandedBase(replace(snapshot, scenario=replace(snapshot.scenario, queued=queue)), BasePlan.of(plan))
    key = _handed_key(version)
    try:
        cache.set(key, handed, timeout=settings.FAIRSCHED_WHAT_IF_HANDOVER_SECONDS)
        last = cache.get(HANDED_LAST_KEY)
        cache.set(HANDED_LAST_KEY, key, timeout=settings.FAIRSCHED_WHAT_IF_HANDOVER_SECONDS)
        if isinstance(last, str) and last != key:
            cache.delete(last)
    except Exception:  # (the cache is a shortcut: whatever it raises, the previews read their own base)
        logger.warning("the what-if base of plan version %s was not handed over", version, exc_info=True)
        return False
    return True


_HANDED_SHAPE = _handed_shape()


def _handed_base(version: tuple[int | None, ...]) -> WhatIfBase | None:
    """The base the replan of `version` handed over (`base_hand_over`), or None. A key can outlive
    the database it was made for (restored, or made again, its ids counted from 1 again): the one
    kept must be of the replan that wrote the version's sample, at its instant."""
    try:
        handed = cache.get(_handed_key(version))
    except Exception:  # (as in `base_hand_over`: the caller reads its own base)
        logger.warning("the what-if base of plan version %s could not be read", version, exc_info=True)
        return None
    sample_id = version[0]
    if not isinstance(handed, _HandedBase) or sample_id is None:
        return None
    if QueueSample.objects.filter(pk=sample_id).values_list("at", flat=True).first() != handed.snapshot.now:
        return None
    return WhatIfBase.of(handed.snapshot, handed.before)


def what_if_after(base: WhatIfBase, changes: Mapping[str, Any]) -> WhatIfAfter:
    """Steps 2 and 3 of `plan_preview`: the levers pulled on copies of `base`'s rows, and the plan after."""
    snapshot, rows, key_of = base.snapshot, base.rows, base.key_of
    scenario = snapshot.scenario
    # 2. The levers, on copies.
    changed_rows = _org_levers_pulled(rows, key_of, changes)
    queue_limits = {
        key_of[slug]: org_levers.queue_limit_check(limit, field="queue_limits")
        for slug, limit in changes.get("queue_limits", {}).items()
    }
    config = copy.copy(snapshot.config)
    proposed = {name: changes[name] for name in CONFIG_LEVERS if name in changes}
    for name, value in config_changes(config, proposed).items():
        setattr(config, name, value)
    queued = _queue_levers_pulled(snapshot, key_of, changes)

    # 3. The rounds under way with the changed rows, then the plan.
    backlogged, ready = backlogged_and_ready(queued, list(scenario.running), changed_rows, scenario.now)
    orgs, _ = fair_service(
        changed_rows, ready=ready, backlogged=backlogged, policy=config.policy, quantum=config.quantum
    )
    for org in scenario.orgs.keys() - orgs.keys():
        orgs[org] = scenario.orgs[org]
    after_scenario = replace(
        scenario,
        orgs=orgs,
        budget=config.budget,
        policy=config.policy,  # type: ignore[arg-type]
        quantum=config.quantum,
        aging=aging_of(config),
        retry_budget=retry_budget_of(config),
        due_first=config.due_first,
        queued=queued,
    )
    return WhatIfAfter(after_scenario, queued, queue_limits, core.plan(after_scenario))


def plan_preview(*, changes: Mapping[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """What-if: the plan now and after the proposed changes, on one snapshot; nothing is written.

    `changes` are the serializer's: `weights`, `caps` and `queue_limits` ({org slug: value}, None
    lifting a cap or limit), `hold` and `release` (org slugs), `budget`, `policy`, `quantum`,
    `aging_step` (None: no aging) and `aging_cap`, `costs` ([{org, workflow, cost}], cost None:
    back to the workflow's default), `priorities` ([{chart, priority?, high_priority?}] of waiting
    charts), `provider_pauses` ([{provider, org?, until}], `until` a datetime) and
    `provider_resumes` ([{provider, org?}]). A value its lever refuses is refused as the lever
    refuses it (`InvalidInput`), naming the change.
    1. Load the snapshot the replan pass would load, and the org rows it was built from
       (`what_if_base`, which plans it as it stands; kept for the previews of the same plan version).
    2. Pull each lever on copies: the org rows (`orgs.levers`), the configuration
       (`knobs.levers`), the queued columns (cost, priority, availability under the pauses).
    3. Recompute every org's place in the rounds under way with the changed rows (as the replan
       would at the next pass), and plan that scenario with the core (`what_if_after`).
    4. Pair up the clear-times (per org and global), each chart's ETA before and after, and list
       the charts that move most (a chart no longer planned first, then by the size of the move,
       then by id); per org, how many charts move earlier and later, and the largest moves
       (`_moves`, on the plans' arrays: no Python step per chart).
    """
    base = what_if_base(now=now)
    after = what_if_after(base, changes)
    return _moves(base, after)


def _org_levers_pulled(
    rows: dict[str, OrgRow], key_of: dict[str, str], changes: Mapping[str, Any]
) -> dict[str, OrgRow]:
    """The org rows after the weight, hold, release and cap levers, in that order."""
    changed_rows = dict(rows)

    def pull(slug: str, fields: org_levers.Fields) -> None:
        key = key_of[slug]
        changed_rows[key] = replace(changed_rows[key], **fields)

    for slug, weight in changes.get("weights", {}).items():
        pull(slug, org_levers.weight_set(changed_rows[key_of[slug]], weight, field="weights"))
    for slug in changes.get("hold", []):
        pull(slug, org_levers.hold(changed_rows[key_of[slug]]))
    for slug in changes.get("release", []):
        pull(slug, org_levers.release(changed_rows[key_of[slug]]))
    for slug, cap in changes.get("caps", {}).items():
        pull(slug, org_levers.cap_set(changed_rows[key_of[slug]], cap, field="caps"))
    return changed_rows


def _queue_levers_pulled(snapshot: Snapshot, key_of: dict[str, str], changes: Mapping[str, Any]) -> core.QueueColumns:
    """A copy of the queued columns after the cost, priority and provider pause levers (copies of the
    columns a lever changes, as arrays: the core reads them so)."""
    queued = core.QueueColumns.of(snapshot.scenario.queued)
    arrays = queued.arrays
    cost, priority, high_priority = arrays.cost, arrays.priority, arrays.high_priority
    available_at = arrays.available_at
    if changes.get("costs"):
        cost = cost.copy()
        costs_now = load_costs(snapshot.now)
        workflow_ids = dict(Workflow.objects.values_list("name", "id"))
        charged: dict[tuple[str, int], int] = {}
        for entry in changes["costs"]:
            workflow_id = workflow_ids[entry["workflow"]]
            override = org_levers.cost_override_check(entry["cost"], field="costs")
            charged[(key_of[entry["org"]], workflow_id)] = org_levers.cost_charged(
                override, default=costs_now.defaults[workflow_id]
            )
        charged_each = _per_pair(snapshot, lambda org_id, workflow_id: charged.get((org_key(org_id), workflow_id)))
        proposed = ~np.isnan(charged_each)
        cost[proposed] = charged_each[proposed]
    if changes.get("priorities"):
        priority, high_priority = priority.copy(), high_priority.copy()
        for entry in changes["priorities"]:
            found = waiting_slot(snapshot, int(entry["chart"]))
            if found is None:
                raise InvalidInput(f"chart {entry['chart']!r} is not waiting", field="priorities")
            fields = prioritized(
                high_priority=entry.get("high_priority"), priority=entry.get("priority"), staff=True, field="priorities"
            )
            if "priority" in fields:
                priority[found] = fields["priority"]
            if "high_priority" in fields:
                high_priority[found] = fields["high_priority"]
    if changes.get("provider_pauses") or changes.get("provider_resumes"):
        available_at = _pauses_laid(snapshot, key_of, changes)
    return queued.replace(cost=cost, priority=priority, high_priority=high_priority, available_at=available_at)


def waiting_slot(snapshot: Snapshot, chart_id: int) -> int | None:
    """The place of waiting chart `chart_id` in the snapshot's queue (None: not waiting). A scan of
    the ids column: a preview names a few charts, and a dict of every id cost more than the scans."""
    found = np.flatnonzero(snapshot.waiting.id == chart_id)
    return int(found[0]) if len(found) else None


def _pauses_laid(snapshot: Snapshot, key_of: dict[str, str], changes: Mapping[str, Any]) -> NDArray[np.float64]:
    """Lift the resumed pauses, add the proposed ones (each `orgs.levers.pause_until_check`ed), and
    give every waiting chart its availability under them: its own (its backoff), or the later end of
    its provider's pauses for everyone and for its org (`snapshot.availability`)."""
    costs_now = load_costs(snapshot.now)
    provider_ids = dict(Provider.objects.values_list("slug", "id"))
    pauses = dict(costs_now.pauses)

    def scope(entry: Mapping[str, Any]) -> tuple[int, int | None]:
        org = entry.get("org")
        return provider_ids[entry["provider"]], None if org is None else int(key_of[org])

    for entry in changes.get("provider_resumes", []):
        pauses.pop(scope(entry), None)
    for entry in changes.get("provider_pauses", []):
        until = org_levers.pause_until_check(entry["until"], now=snapshot.now, field="provider_pauses")
        # A second pause of one scope: the later end holds (`Costs.pause_until` takes the latest).
        pauses[scope(entry)] = max(to_seconds(until), pauses.get(scope(entry), -math.inf))
    changed_costs: Costs = replace(costs_now, pauses=pauses)
    pause = _per_pair(snapshot, changed_costs.pause_until)
    return availability(snapshot.waiting.available_at, pause).available_at


def _per_pair(snapshot: Snapshot, value_of: Callable[[int, int], float | None]) -> NDArray[np.float64]:
    """`value_of(org id, workflow id)` of each waiting chart (NaN for None), asked once per distinct
    (org, workflow): a what-if's cost and pause levers are per pair, and a queue holds few pairs."""
    org_id, workflow_id = snapshot.waiting.org_id, snapshot.waiting.workflow_id
    span = int(workflow_id.max()) + 1 if len(workflow_id) else 1
    pairs, pair_of_chart = np.unique(org_id * span + workflow_id, return_inverse=True)
    values = np.array([value_of(pair // span, pair % span) for pair in pairs.tolist()], dtype=np.float64)
    return values[pair_of_chart.reshape(-1)]


def plan_etas(plan: PlanFigures, queued_count: int) -> NDArray[np.float64]:
    """Each chart's ETA in `plan` as floats (NaN: none), laid out as the scenario lists its charts:
    the queued ones in `Scenario.queued`'s order, then the running ones (`PlanArrays`)."""
    arrays = plan.arrays
    etas = np.full(queued_count, np.nan)
    etas[arrays.queued] = arrays.eta[: len(arrays.queued)]
    return np.concatenate((etas, arrays.eta[len(arrays.queued) :]))


def _moves(base: WhatIfBase, what_if: WhatIfAfter) -> dict[str, Any]:
    """Step 4 of `plan_preview`: the answer, as the API shapes it. Every chart is compared at once,
    on the plans' arrays (`plan_etas`); only the charts listed are made into rows."""
    rows, snapshot, before, after = base.rows, base.snapshot, base.before, what_if.after
    queued_count = len(what_if.queued)

    def stamp(seconds: float | None) -> str | None:
        moment = to_datetime(seconds)
        return moment.isoformat() if moment else None

    def slug_of(key: str) -> str:
        return rows[key].slug if key in rows else key

    was, will_be = plan_etas(before, queued_count), plan_etas(after, queued_count)
    chart_id = np.concatenate((snapshot.waiting.id, snapshot.in_flight.id))
    chart_org = np.concatenate((snapshot.waiting.org_id, snapshot.in_flight.org_id))
    with np.errstate(invalid="ignore"):
        delta = will_be - was
    planned_once = np.isnan(was) != np.isnan(will_be)  # a chart that gains or loses its ETA
    moved = planned_once | (np.abs(delta) >= 1)  # (NaN >= 1 is False: planned on neither side)
    moving = np.flatnonzero(moved)
    size = np.where(planned_once[moving], np.inf, np.abs(delta[moving]))
    moving = moving[np.lexsort((chart_id[moving], -size))]  # largest first, then by id

    # Per org: earlier (or newly planned), later, unplanned, and the largest moves each way.
    org_ids, org_code = np.unique(chart_org[moving], return_inverse=True)
    org_code = org_code.reshape(-1)
    moving_delta = delta[moving]
    unplanned = np.isnan(will_be[moving])
    earlier = ~unplanned & (np.isnan(was[moving]) | (moving_delta < 0))
    later = ~unplanned & ~earlier
    most_earlier, most_later = np.zeros(len(org_ids)), np.zeros(len(org_ids))
    finite = ~planned_once[moving]
    np.maximum.at(most_earlier, org_code[finite & earlier], -moving_delta[finite & earlier])
    np.maximum.at(most_later, org_code[finite & later], moving_delta[finite & later])
    per_org = {
        org_key(org_id): OrgMoves(int(early), int(late), int(lost), float(most_early), float(most_late))
        for org_id, early, late, lost, most_early, most_late in zip(
            org_ids.tolist(),
            np.bincount(org_code, weights=earlier, minlength=len(org_ids)).tolist(),
            np.bincount(org_code, weights=later, minlength=len(org_ids)).tolist(),
            np.bincount(org_code, weights=unplanned, minlength=len(org_ids)).tolist(),
            most_earlier.tolist(),
            most_later.tolist(),
            strict=True,
        )
    }
    waiting_orgs, waiting_counts = np.unique(snapshot.waiting.org_id, return_counts=True)
    queue_size = {
        org_key(org): count for org, count in zip(waiting_orgs.tolist(), waiting_counts.tolist(), strict=True)
    }
    queue_limits = what_if.queue_limits
    orgs_out: dict[str, dict[str, Any]] = {}
    for key in sorted(before.org_clear.keys() | after.org_clear.keys() | queue_limits.keys()):
        org_moves = per_org.get(key, OrgMoves())
        limit = queue_limits.get(key)
        orgs_out[slug_of(key)] = {
            "before": stamp(before.org_clear.get(key)),
            "after": stamp(after.org_clear.get(key)),
            "charts_earlier": org_moves.earlier,
            "charts_later": org_moves.later,
            "charts_unplanned": org_moves.unplanned,
            "most_earlier_seconds": round(org_moves.most_earlier, 3),
            "most_later_seconds": round(org_moves.most_later, 3),
            "queued": queue_size.get(key, 0),
            "queue_full": limit is not None and queue_size.get(key, 0) >= limit,
        }

    def when(seconds: float) -> float | None:
        return None if math.isnan(seconds) else seconds

    listed = moving[:PREVIEW_TOP_CHARTS]
    return {
        "orgs": orgs_out,
        "global": {"before": stamp(before.global_clear), "after": stamp(after.global_clear)},
        "charts_moved": len(moving),
        "charts": [
            {
                "id": chart,
                "org": slug_of(org_key(org)),
                "before": stamp(when(before_eta)),
                "after": stamp(when(after_eta)),
                "moved_seconds": None if math.isnan(moved_by) else round(moved_by, 3),
            }
            for chart, org, before_eta, after_eta, moved_by in zip(
                chart_id[listed].tolist(),
                chart_org[listed].tolist(),
                was[listed].tolist(),
                will_be[listed].tolist(),
                delta[listed].tolist(),
                strict=True,
            )
        ],
    }
