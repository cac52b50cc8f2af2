"""Writes on the scheduler's configuration: budget, policy, aging, pass intervals, retry policy."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.utils.dateparse import parse_datetime

from charts.models import QUEUE_STATES, Chart
from charts.services import PRIORITY
from common.actors import Actor
from common.bounds import Number, Whole
from common.errors import InvalidInput
from common.events import changed
from orgs.models import Provider, Workflow
from orgs.services import COST, MAX_CONCURRENCY, QUEUE_LIMIT, WEIGHT
from scheduling import core
from scheduling.models import ConfigChange, SchedulerConfig
from scheduling.snapshot import (
    Epoch,
    backlogged_and_ready,
    chart_key,
    fair_service,
    load_costs,
    load_orgs,
    load_snapshot,
    to_datetime,
    to_seconds,
)


def budget_set(*, budget: int, actor: Actor, reason: str = "") -> SchedulerConfig:
    """Set the total budget. Lowering it below what runs preempts nothing: dispatch waits for the drain."""
    return scheduler_config_set(actor=actor, reason=reason, budget=budget)


def policy_set(*, policy: str, actor: Actor, quantum: float | None = None, reason: str = "") -> SchedulerConfig:
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


def scheduler_config_set(*, actor: Actor, reason: str = "", **values: Any) -> SchedulerConfig:
    """Change any of the configuration's fields at once; all are validated before anything is written.
    Each changed field is a line of the change log (`ConfigChange`), with `reason`. Staff only."""
    actor.staff_required(field=next(iter(values), "config"))
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
                actor=actor.name,
                field=name,
                old_value=str(getattr(config, name)),
                new_value=str(value),
                reason=reason[:500],
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
        changed(kind="config", actor=actor.name, fields=sorted(cleaned))
    return config


PREVIEW_LEVERS = (
    "weights",
    "hold",
    "release",
    "caps",
    "queue_limits",
    "budget",
    "policy",
    "quantum",
    "aging_step",
    "aging_cap",
    "costs",
    "priorities",
    "provider_pauses",
    "provider_resumes",
)
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


def _shaped(changes: dict[str, Any], name: str, shape: type) -> Any:
    value = changes.get(name)
    if value is None:
        return {} if shape is dict else []
    if not isinstance(value, shape):
        kind = "an object keyed by org slug" if shape is dict else "a list"
        raise InvalidInput(f"{name} must be {kind}", field=name)
    return value


def _entries(changes: dict[str, Any], name: str) -> list[dict[str, Any]]:
    entries = _shaped(changes, name, list)
    if not all(isinstance(entry, dict) for entry in entries):
        raise InvalidInput(f"each entry of {name} must be an object", field=name)
    return list(entries)


def _moment(value: object, *, field: str) -> float:
    moment = parse_datetime(value) if isinstance(value, str) else value
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidInput(f"{field} needs a date-time with its timezone, got {value!r}", field=field)
    return to_seconds(moment)


def plan_preview(*, changes: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """What-if: the plan now and after the proposed changes, on one snapshot; nothing is written.

    `changes` may hold any of `PREVIEW_LEVERS`: `weights`, `caps` and `queue_limits` ({org slug:
    value}, null lifting a cap or limit), `hold` and `release` (org slugs), `budget`, `policy`,
    `quantum`, `aging_step` (null: no aging) and `aging_cap`, `costs` ([{org, workflow, cost}],
    cost null: back to the workflow's default), `priorities` ([{chart, priority?, high_priority?}]
    of waiting charts), `provider_pauses` ([{provider, org?, until}]) and `provider_resumes`
    ([{provider, org?}]). A name it does not know, an unknown org, workflow, provider or chart, and
    a value the real lever would refuse are refused with the field named.
    1. Check the names, then load the snapshot the replan pass would load (and the org rows, costs
       and pauses it was built from).
    2. Apply the changes to copies: org rows (weight, hold, release, cap), configuration (budget,
       policy, quantum, aging), queued columns (cost, priority, availability under the pauses).
    3. Recompute every org's place in the rounds under way with the changed rows (as the replan
       would at the next pass), and plan both scenarios with the core.
    4. Pair up the clear-times (per org and global), each chart's ETA before and after, and list
       the charts that move most (a chart no longer planned first, then by the size of the move,
       then by id); per org, how many charts move earlier and later, and the largest moves.
    """
    # 1. Names first: nothing is read for a request that cannot be answered.
    if not isinstance(changes, dict):
        raise InvalidInput("changes must be an object", field="changes")
    for name in changes:
        if name not in PREVIEW_LEVERS:
            raise InvalidInput(f"unknown change {name!r}; known: {', '.join(PREVIEW_LEVERS)}", field=name)
    snapshot = load_snapshot(now=now)
    scenario = snapshot.scenario
    rows = load_orgs()
    key_of = {row.slug: key for key, row in rows.items()}

    def org_key(slug: object, field: str) -> str:
        if not isinstance(slug, str) or slug not in key_of:
            raise InvalidInput(f"unknown org {slug!r}", field=field)
        return key_of[slug]

    # 2. The org levers, on copies of the rows.
    changed_rows = dict(rows)

    def set_row(key: str, **values: Any) -> None:
        changed_rows[key] = replace(changed_rows[key], **values)

    for slug, weight in _shaped(changes, "weights", dict).items():
        set_row(org_key(slug, "weights"), weight=WEIGHT.check(weight, field="weights"))
    for slug in _shaped(changes, "hold", list):
        key = org_key(slug, "hold")
        if changed_rows[key].weight:
            set_row(key, weight=0, weight_before_hold=changed_rows[key].weight)
    for slug in _shaped(changes, "release", list):
        key = org_key(slug, "release")
        if changed_rows[key].weight == 0:
            set_row(key, weight=changed_rows[key].weight_before_hold or 1, weight_before_hold=None)
    for slug, cap in _shaped(changes, "caps", dict).items():
        key = org_key(slug, "caps")
        set_row(key, max_concurrency=MAX_CONCURRENCY.check_optional(cap, field="caps"))
    queue_limits: dict[str, int | None] = {}
    for slug, limit in _shaped(changes, "queue_limits", dict).items():
        key = org_key(slug, "queue_limits")
        queue_limits[key] = QUEUE_LIMIT.check_optional(limit, field="queue_limits")

    # The configuration levers, checked as `scheduler_config_set` checks them.
    config: dict[str, Any] = {
        "budget": scenario.budget,
        "policy": scenario.policy,
        "quantum": scenario.quantum,
        "aging_step": scenario.aging.step if scenario.aging else None,
        "aging_cap": scenario.aging.cap if scenario.aging else snapshot.config.aging_cap,
    }
    for name in ("budget", "quantum", "aging_step", "aging_cap"):
        if name in changes:
            config[name] = config_value_check(name, changes[name])
    if "policy" in changes:
        if changes["policy"] not in SchedulerConfig.Policy.values:
            choices = ", ".join(SchedulerConfig.Policy.values)
            raise InvalidInput(f"policy must be one of {choices}, got {changes['policy']!r}", field="policy")
        config["policy"] = changes["policy"]

    # The chart levers, on copies of the queued columns.
    queued = core.QueueColumns.of(scenario.queued)
    queued = queued.replace(
        cost=list(queued.cost),
        priority=list(queued.priority),
        high_priority=list(queued.high_priority),
        available_at=list(queued.available_at),
    )
    cost_entries = _entries(changes, "costs")
    if cost_entries:
        costs_now = load_costs(snapshot.now)
        workflow_ids = dict(Workflow.objects.values_list("name", "id"))
        pair_cost: dict[tuple[str, int], int] = {}
        for entry in cost_entries:
            _known_keys(entry, {"org", "workflow", "cost"}, field="costs")
            key = org_key(entry.get("org"), "costs")
            workflow_id = workflow_ids.get(entry.get("workflow"))  # type: ignore[arg-type]
            if workflow_id is None:
                raise InvalidInput(f"unknown workflow {entry.get('workflow')!r}", field="costs")
            cost = entry.get("cost")
            pair_cost[(key, workflow_id)] = (
                costs_now.defaults[workflow_id] if cost is None else COST.check(cost, field="costs")
            )
        for index, pair in enumerate(zip(queued.org, snapshot.queued_workflow, strict=True)):
            if pair in pair_cost:
                queued.cost[index] = pair_cost[pair]
    priority_entries = _entries(changes, "priorities")
    if priority_entries:
        slot = {chart_id: index for index, chart_id in enumerate(queued.id)}
        for entry in priority_entries:
            _known_keys(entry, {"chart", "priority", "high_priority"}, field="priorities")
            chart = entry.get("chart")
            found = slot.get(chart_key(chart)) if isinstance(chart, int) and not isinstance(chart, bool) else None
            if found is None:
                raise InvalidInput(f"chart {chart!r} is not waiting", field="priorities")
            if "priority" not in entry and "high_priority" not in entry:
                raise InvalidInput("each priority change needs priority or high_priority", field="priorities")
            if "priority" in entry:
                queued.priority[found] = PRIORITY.check(entry["priority"], field="priorities")
            if "high_priority" in entry:
                if not isinstance(entry["high_priority"], bool):
                    raise InvalidInput("high_priority must be true or false", field="priorities")
                queued.high_priority[found] = entry["high_priority"]
    pause_entries = _entries(changes, "provider_pauses")
    resume_entries = _entries(changes, "provider_resumes")
    if pause_entries or resume_entries:
        costs_now = load_costs(snapshot.now)
        provider_ids = dict(Provider.objects.values_list("slug", "id"))
        pauses = dict(costs_now.pauses)
        for name, entries, allowed in (
            ("provider_resumes", resume_entries, {"provider", "org"}),
            ("provider_pauses", pause_entries, {"provider", "org", "until"}),
        ):
            for entry in entries:
                _known_keys(entry, allowed, field=name)
                provider_id = provider_ids.get(entry.get("provider"))  # type: ignore[arg-type]
                if provider_id is None:
                    raise InvalidInput(f"unknown provider {entry.get('provider')!r}", field=name)
                org_id = None if entry.get("org") is None else int(org_key(entry["org"], name))
                if name == "provider_resumes":
                    pauses.pop((provider_id, org_id), None)
                    continue
                until = _moment(entry.get("until"), field=name)
                if until <= scenario.now:
                    raise InvalidInput("until must be in the future", field=name)
                pauses[(provider_id, org_id)] = max(until, pauses.get((provider_id, org_id), until))
        # Each waiting chart's own availability (its backoff), before any pause was laid over it.
        own = dict(Chart.objects.filter(state__in=QUEUE_STATES).values_list("id", Epoch("available_at")))
        changed_costs = replace(costs_now, pauses=pauses)
        for index, (chart_id, org, workflow_id) in enumerate(
            zip(queued.id, queued.org, snapshot.queued_workflow, strict=True)
        ):
            queued.available_at[index] = changed_costs.ready_at(
                int(org), workflow_id, own.get(int(chart_id), queued.available_at[index])
            )

    # 3. The rounds under way with the changed rows, then both plans.
    backlogged, ready = backlogged_and_ready(queued, list(scenario.running), changed_rows, scenario.now)
    orgs, _ = fair_service(
        changed_rows, ready=ready, backlogged=backlogged, policy=str(config["policy"]), quantum=config["quantum"]
    )
    for org in scenario.orgs.keys() - orgs.keys():
        orgs[org] = scenario.orgs[org]
    aging = core.Aging(step=config["aging_step"], cap=config["aging_cap"]) if config["aging_step"] else None
    after_scenario = replace(
        scenario,
        orgs=orgs,
        budget=config["budget"],
        policy=config["policy"],
        quantum=config["quantum"],
        aging=aging,
        queued=queued,
    )
    before = core.plan(scenario)
    after = core.plan(after_scenario)

    # 4. Clear-times, ETA moves per chart and per org.
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


def _known_keys(entry: dict[str, Any], allowed: set[str], *, field: str) -> None:
    if unknown := sorted(set(entry) - allowed):
        raise InvalidInput(f"unknown key(s) in {field}: {', '.join(map(str, unknown))}", field=field)
