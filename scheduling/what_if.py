"""The what-if: the plan now and after proposed lever changes, on one snapshot; a read, nothing is written.

Each lever is the same pure function the services write with (`orgs.levers`, `charts.levers`,
`knobs.levers`), laid over copies of the snapshot's rows instead of written; the API's
serializer (`scheduling.api.PlanChangesSerializer`) has checked the shape of the changes and that
the orgs, workflows and providers they name exist, so this module does not check them again.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from charts.levers import prioritized
from common.errors import InvalidInput
from knobs.levers import config_changes
from orgs import levers as org_levers
from orgs.models import Provider, Workflow
from scheduling import core
from scheduling.snapshot import (
    Costs,
    OrgRow,
    Snapshot,
    aging_of,
    availability,
    backlogged_and_ready,
    chart_key,
    fair_service,
    load_costs,
    load_orgs,
    load_snapshot,
    retry_budget_of,
    to_datetime,
    to_seconds,
)

# The configuration levers a preview may change (the scenario is built from the configuration).
CONFIG_LEVERS = ("budget", "policy", "quantum", "aging_step", "aging_cap")
# How many charts the preview lists among those that move most.
PREVIEW_TOP_CHARTS = 25


class ChartMove(NamedTuple):
    """A chart whose ETA moves by 1 s or more: `size` is how far (infinite if it gains or loses its ETA)."""

    size: float
    id: str
    before: float | None
    after: float | None


@dataclass
class OrgMoves:
    """How an org's charts move: how many earlier, later, losing their ETA, and the largest moves."""

    earlier: int = 0
    later: int = 0
    unplanned: int = 0
    most_earlier: float = 0.0
    most_later: float = 0.0

    def add(self, move: ChartMove) -> None:
        if move.before is None or move.after is None:
            if move.after is None:
                self.unplanned += 1
            else:
                self.earlier += 1
            return
        delta = move.after - move.before
        if delta < 0:
            self.earlier += 1
            self.most_earlier = max(self.most_earlier, -delta)
        else:
            self.later += 1
            self.most_later = max(self.most_later, delta)


def plan_preview(*, changes: Mapping[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """What-if: the plan now and after the proposed changes, on one snapshot; nothing is written.

    `changes` are the serializer's: `weights`, `caps` and `queue_limits` ({org slug: value}, None
    lifting a cap or limit), `hold` and `release` (org slugs), `budget`, `policy`, `quantum`,
    `aging_step` (None: no aging) and `aging_cap`, `costs` ([{org, workflow, cost}], cost None:
    back to the workflow's default), `priorities` ([{chart, priority?, high_priority?}] of waiting
    charts), `provider_pauses` ([{provider, org?, until}], `until` a datetime) and
    `provider_resumes` ([{provider, org?}]). A value its lever refuses is refused as the lever
    refuses it (`InvalidInput`), naming the change.
    1. Load the snapshot the replan pass would load, and the org rows it was built from.
    2. Pull each lever on copies: the org rows (`orgs.levers`), the configuration
       (`knobs.levers`), the queued columns (cost, priority, availability under the pauses).
    3. Recompute every org's place in the rounds under way with the changed rows (as the replan
       would at the next pass), and plan both scenarios with the core.
    4. Pair up the clear-times (per org and global), each chart's ETA before and after, and list
       the charts that move most (a chart no longer planned first, then by the size of the move,
       then by id); per org, how many charts move earlier and later, and the largest moves.
    """
    # 1. One snapshot for both plans.
    snapshot = load_snapshot(now=now)
    scenario = snapshot.scenario
    rows = load_orgs()
    key_of = {row.slug: key for key, row in rows.items()}

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

    # 3. The rounds under way with the changed rows, then both plans.
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
    before = core.plan(scenario)
    after = core.plan(after_scenario)

    # 4. Clear-times, ETA moves per chart and per org.
    return _moves(rows, queued, scenario, before, after, queue_limits)


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
    """A copy of the queued columns after the cost, priority and provider pause levers."""
    queued = core.QueueColumns.of(snapshot.scenario.queued)
    queued = queued.replace(
        cost=list(queued.cost),
        priority=list(queued.priority),
        high_priority=list(queued.high_priority),
        available_at=list(queued.available_at),
    )
    if changes.get("costs"):
        costs_now = load_costs(snapshot.now)
        workflow_ids = dict(Workflow.objects.values_list("name", "id"))
        charged: dict[tuple[str, int], int] = {}
        for entry in changes["costs"]:
            workflow_id = workflow_ids[entry["workflow"]]
            override = org_levers.cost_override_check(entry["cost"], field="costs")
            charged[(key_of[entry["org"]], workflow_id)] = org_levers.cost_charged(
                override, default=costs_now.defaults[workflow_id]
            )
        for index, pair in enumerate(zip(queued.org, snapshot.queued_workflow, strict=True)):
            if pair in charged:
                queued.cost[index] = charged[pair]
    if changes.get("priorities"):
        slot = {chart_id: index for index, chart_id in enumerate(queued.id)}
        for entry in changes["priorities"]:
            found = slot.get(chart_key(entry["chart"]))
            if found is None:
                raise InvalidInput(f"chart {entry['chart']!r} is not waiting", field="priorities")
            fields = prioritized(
                high_priority=entry.get("high_priority"), priority=entry.get("priority"), staff=True, field="priorities"
            )
            if "priority" in fields:
                queued.priority[found] = fields["priority"]
            if "high_priority" in fields:
                queued.high_priority[found] = fields["high_priority"]
    if changes.get("provider_pauses") or changes.get("provider_resumes"):
        _pauses_laid(snapshot, key_of, changes, queued)
    return queued


def _pauses_laid(
    snapshot: Snapshot, key_of: dict[str, str], changes: Mapping[str, Any], queued: core.QueueColumns
) -> None:
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
    pause = np.array(
        [
            changed_costs.pause_until(int(org), workflow_id)
            for org, workflow_id in zip(queued.org, snapshot.queued_workflow, strict=True)
        ],
        dtype=np.float64,
    )
    queued.available_at[:] = core.times_list(availability(snapshot.waiting.available_at, pause).available_at)


def _moves(
    rows: dict[str, OrgRow],
    queued: core.QueueColumns,
    scenario: core.Scenario,
    before: core.Plan,
    after: core.Plan,
    queue_limits: dict[str, int | None],
) -> dict[str, Any]:
    """Step 4 of `plan_preview`: the answer, as the API shapes it."""

    def stamp(seconds: float | None) -> str | None:
        moment = to_datetime(seconds)
        return moment.isoformat() if moment else None

    def slug_of(key: str) -> str:
        return rows[key].slug if key in rows else key

    moves: list[ChartMove] = []
    for chart_id, was in before.eta.items():
        will_be = after.eta[chart_id]
        delta = None if was is None or will_be is None else will_be - was
        if was == will_be or (delta is not None and abs(delta) < 1):
            continue
        moves.append(ChartMove(math.inf if delta is None else abs(delta), chart_id, was, will_be))
    moves.sort(key=lambda move: (-move.size, move.id))
    org_of = dict(zip(queued.id, queued.org, strict=True))
    org_of.update((chart.id, chart.org) for chart in scenario.running)
    per_org: dict[str, OrgMoves] = {}
    for move in moves:
        per_org.setdefault(org_of.get(move.id, ""), OrgMoves()).add(move)
    queue_size = Counter(queued.org)
    orgs_out: dict[str, dict[str, Any]] = {}
    for key in sorted(before.org_clear.keys() | after.org_clear.keys() | queue_limits.keys()):
        moved = per_org.get(key, OrgMoves())
        limit = queue_limits.get(key)
        orgs_out[slug_of(key)] = {
            "before": stamp(before.org_clear.get(key)),
            "after": stamp(after.org_clear.get(key)),
            "charts_earlier": moved.earlier,
            "charts_later": moved.later,
            "charts_unplanned": moved.unplanned,
            "most_earlier_seconds": round(moved.most_earlier, 3),
            "most_later_seconds": round(moved.most_later, 3),
            "queued": queue_size.get(key, 0),
            "queue_full": limit is not None and queue_size[key] >= limit,
        }
    return {
        "orgs": orgs_out,
        "global": {"before": stamp(before.global_clear), "after": stamp(after.global_clear)},
        "charts_moved": len(moves),
        "charts": [
            {
                "id": int(move.id),
                "org": slug_of(org_of.get(move.id, "")),
                "before": stamp(move.before),
                "after": stamp(move.after),
                "moved_seconds": None
                if move.before is None or move.after is None
                else round(move.after - move.before, 3),
            }
            for move in moves[:PREVIEW_TOP_CHARTS]
        ],
    }
