"""The rescue: the smallest change of levers that brings the at-risk count of one org (or of all) to
zero, or to its least, searched over what-ifs (`scheduling.what_if`) of one snapshot; and its apply,
through the levers' own services.

The space searched (bounded by the configuration): the weight of an org within [its weight + 1,
`rescue_max_weight`]; the budget within [budget + 1, `rescue_max_budget`] (None: the budget is not a
lever of the rescue); the high tier for at-risk charts of the chosen org (of the org with most at
risk, for all orgs).

"Smallest", in this order (a lexicographic key, `Change.size` after the count):
1. the fewest charts at risk after the change (zero when some change in the space reaches it);
2. the fewest levers (a weight, the budget, each chart sent to the high tier is one lever);
3. charts to the high tier only as a last resort: a change without them comes first, then the
   fewest charts;
4. the least budget added, then the least weight added (summed over the orgs).

The search (`search`), planning at most `RESCUE_MAX_PLANS` what-ifs after the plan as it stands:
1. Each single lever at its bound; where that lowers the count, the least value of it that gives the
   same count, by bisection (the count is taken to fall as a weight or the budget rises: the answer
   is always the plan of the change it names, only its minimality rests on that).
2. If no single lever clears the risk: the budget and the weight of the org with most at risk, both
   at their bounds; where that beats the best single lever, the least budget with that weight, then
   the least weight with that budget.
3. If the risk is still not cleared: the high tier for the at-risk charts of that org, earliest due
   first, over the best change so far: at most `RESCUE_MAX_HIGH_TIER` of them, the fewest that give
   the count that all of them give, by bisection.
With W = max weight, B = max budget - budget, H = RESCUE_MAX_HIGH_TIER and k candidate orgs, at most
k (1 + log2 W) + (1 + log2 B) + (1 + log2 B + log2 W) + (1 + log2 H) plans, and never more than
RESCUE_MAX_PLANS (past it, the best change found so far is the answer, `exhausted` says so).

At risk and late by the promise rule (`charts.promise.open_verdicts`, the one every reader takes): a
waiting or running chart is at risk when its plan gives it a chance of finishing after its due time
(the core's `late_chance`, from the law of its ETA band) at or above the configuration's
`at_risk_threshold`, and it is not yet past due; late when past its due time now (a change of levers
cannot undo that: the same count before and after).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
from django.db import transaction
from numpy.typing import NDArray

from charts.models import Chart
from charts.promise import open_verdicts
from charts.services import chart_prioritize
from common.actors import Actor
from common.errors import Conflict, InvalidInput
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.models import Org
from orgs.services import org_weight_set
from scheduling.snapshot import Snapshot, org_key, to_datetime
from scheduling.what_if import PlanFigures, WhatIfBase, what_if_after, what_if_base

# The most what-ifs one rescue plans after the plan as it stands (at 100k queued charts a what-if plan
# is ~0.2 s of CPU: `bench/bench_rescue.py`).
RESCUE_MAX_PLANS = 20
# The most charts a rescue sends to the high tier, and the most orgs whose weight it tries (all orgs).
RESCUE_MAX_HIGH_TIER = 25
RESCUE_CANDIDATE_ORGS = 3
# How a refused apply ends: what happened, and what the operator does next.
NOTHING_APPLIED = "nothing was applied; find the rescue again from the levers as they are now"


@dataclass(frozen=True)
class Change:
    """A rescue's change: new weights (org key -> weight), a new budget (None: unchanged), and the
    charts sent to the high tier (chart ids)."""

    weights: Mapping[str, int] = field(default_factory=dict)
    budget: int | None = None
    high_tier: tuple[int, ...] = ()

    @property
    def levers(self) -> int:
        return len(self.weights) + (self.budget is not None) + len(self.high_tier)

    @property
    def key(self) -> tuple[Any, ...]:
        """The change as a hashable value (equal changes, equal keys)."""
        return tuple(sorted(self.weights.items())), self.budget, self.high_tier


@dataclass(frozen=True)
class Levers:
    """The levers as the search started from them: the budget and every org's weight (by key), and
    the bounds of the rescue (`max_budget` None: the budget is not a lever)."""

    budget: int
    weights: Mapping[str, int]
    max_weight: int
    max_budget: int | None

    def size(self, change: Change) -> tuple[int, int, int, int, int]:
        """Step 2-4 of the module's "smallest": levers, then high tier, budget and weight added."""
        budget_added = 0 if change.budget is None else change.budget - self.budget
        weight_added = sum(weight - self.weights[key] for key, weight in change.weights.items())
        return change.levers, bool(change.high_tier), len(change.high_tier), budget_added, weight_added


@dataclass(frozen=True)
class Risk:
    """Per org key: its charts at risk and late (see the module's docstring), and the at-risk charts
    (ids, earliest due first)."""

    at_risk: Mapping[str, int]
    late: Mapping[str, int]
    at_risk_charts: Mapping[str, Sequence[int]]

    def count(self, org: str | None) -> int:
        """At risk in `org` (None: in every org)."""
        return sum(self.at_risk.values()) if org is None else self.at_risk.get(org, 0)


# What the search asks of a change: the risk after it (the seam the tests fill with a fake plan).
Evaluate = Callable[[Change], Risk]


class _OutOfPlans(Exception):
    pass


@dataclass
class SearchResult:
    change: Change
    risk: Risk
    plans: int
    exhausted: bool


def search(
    evaluate: Evaluate, *, levers: Levers, before: Risk, org: str | None, max_plans: int = RESCUE_MAX_PLANS
) -> SearchResult:
    """The smallest change (the module's docstring) for the at-risk count of `org` (None: all), by
    the module's steps, each change's risk from `evaluate` (each distinct change evaluated once)."""
    seen: dict[tuple[Any, ...], Risk] = {}
    best = Change()
    best_risk = before

    def risk_of(change: Change) -> Risk:
        key = change.key
        if key not in seen:
            if len(seen) >= max_plans:
                raise _OutOfPlans
            seen[key] = evaluate(change)
        return seen[key]

    def count(change: Change) -> int:
        return risk_of(change).count(org)

    def offer(change: Change) -> None:
        nonlocal best, best_risk
        risk = risk_of(change)
        if (risk.count(org), *levers.size(change)) < (best_risk.count(org), *levers.size(best)):
            best, best_risk = change, risk

    def least(low: int, high: int, made: Callable[[int], Change]) -> None:
        """Offer the least value in [low, high] whose change gives the count of `high`'s, if that
        count is below the best so far (bisection)."""
        target = count(made(high))
        if target >= best_risk.count(org):
            return
        while low < high:
            middle = (low + high) // 2
            if count(made(middle)) <= target:
                high = middle
            else:
                low = middle + 1
        offer(made(high))

    def weighted(key: str) -> Callable[[int], Change]:
        return lambda weight: Change(weights={key: weight})

    candidates = [org] if org is not None else sorted(before.at_risk, key=lambda key: (-before.at_risk[key], key))
    candidates = [key for key in candidates if before.at_risk.get(key) and key in levers.weights]
    candidates = candidates[:RESCUE_CANDIDATE_ORGS]
    can_raise = [key for key in candidates if 0 < levers.weights[key] < levers.max_weight]
    max_budget = levers.max_budget if levers.max_budget is not None and levers.max_budget > levers.budget else None
    exhausted = False
    try:
        if before.count(org) == 0:
            return SearchResult(best, best_risk, len(seen), exhausted)
        # 1. Single levers.
        for key in can_raise:
            least(levers.weights[key] + 1, levers.max_weight, weighted(key))
        if max_budget is not None:
            least(levers.budget + 1, max_budget, lambda budget: Change(budget=budget))
        # 2. The budget and the weight of the org with most at risk.
        if best_risk.count(org) and max_budget is not None and can_raise:
            key = can_raise[0]
            least(levers.budget + 1, max_budget, lambda budget: Change({key: levers.max_weight}, budget))
            if best.budget is not None and key in best.weights:
                paired_budget = best.budget
                least(levers.weights[key] + 1, levers.max_weight, lambda weight: Change({key: weight}, paired_budget))
        # 3. The high tier for the at-risk charts of that org, over the best change so far.
        if best_risk.count(org) and candidates:
            charts = list(best_risk.at_risk_charts.get(candidates[0], ()))[:RESCUE_MAX_HIGH_TIER]
            if charts:
                over = best
                least(1, len(charts), lambda k: replace(over, high_tier=tuple(charts[:k])))
    except _OutOfPlans:
        exhausted = True
    return SearchResult(best, best_risk, len(seen), exhausted)


@dataclass(frozen=True)
class _Dues:
    """Each chart's due time (seconds, NaN: none) and org key, laid out as `plan_etas` lays out the
    plan's ETAs: the snapshot's queued charts, then its running ones."""

    chart_id: NDArray[np.int64]
    org: list[str]
    due: NDArray[np.float64]
    now: float


def _dues(snapshot: Snapshot) -> _Dues:
    """The due times of the snapshot's charts (`ActiveCharts.due`, each chart's `due_at`), laid out
    as the plan's ETAs (`plan_etas`)."""
    chart_id = np.concatenate((snapshot.waiting.id, snapshot.in_flight.id))
    org = [org_key(org_id) for org_id in np.concatenate((snapshot.waiting.org_id, snapshot.in_flight.org_id)).tolist()]
    due = np.concatenate((snapshot.waiting.due, snapshot.in_flight.due)).astype(np.float64)
    return _Dues(chart_id, org, due, snapshot.scenario.now)


def late_chances(plan: PlanFigures, dues: _Dues) -> NDArray[np.float64]:
    """Each chart's chance of finishing after its due time (`core.Plan.late_chance`, NaN: no due time
    or no ETA), laid out as `_dues`."""
    arrays = plan.arrays
    queued_count = len(dues.chart_id) - (len(arrays.eta) - len(arrays.queued))
    laid = np.full(queued_count, np.nan)
    laid[arrays.queued] = arrays.late_chance[: len(arrays.queued)]
    return np.concatenate((laid, arrays.late_chance[len(arrays.queued) :]))


def plan_risk(plan: PlanFigures, dues: _Dues, threshold: float) -> Risk:
    """The `Risk` of a plan: each chart at risk or late by the promise rule (`charts.promise.open_verdicts`,
    with its `late_chances` in the plan), counted per org."""
    at_risk, late = open_verdicts(due=dues.due, late_chance=late_chances(plan, dues), threshold=threshold, now=dues.now)
    at_risk_by_org: dict[str, int] = {}
    charts: dict[str, list[int]] = {}
    marked = np.flatnonzero(at_risk)
    for index in marked[np.lexsort((dues.chart_id[marked], dues.due[marked]))].tolist():
        key = dues.org[index]
        at_risk_by_org[key] = at_risk_by_org.get(key, 0) + 1
        charts.setdefault(key, []).append(int(dues.chart_id[index]))
    late_by_org: dict[str, int] = {}
    for index in np.flatnonzero(late).tolist():
        late_by_org[dues.org[index]] = late_by_org.get(dues.org[index], 0) + 1
    return Risk(at_risk_by_org, late_by_org, charts)


@dataclass(frozen=True)
class Rescue:
    """A rescue found: the change, the risk and clear-times before and after, and the search's figures."""

    org: str | None
    base: WhatIfBase
    levers: Levers
    change: Change
    before: Risk
    after: Risk
    after_plan: PlanFigures
    plans: int
    exhausted: bool

    def what_if_changes(self) -> dict[str, Any]:
        """The change as the what-if's change list (`scheduling.api.PlanChangesSerializer`)."""
        rows = self.base.rows
        changes: dict[str, Any] = {}
        if self.change.weights:
            changes["weights"] = {rows[key].slug: weight for key, weight in self.change.weights.items()}
        if self.change.budget is not None:
            changes["budget"] = self.change.budget
        if self.change.high_tier:
            changes["priorities"] = [{"chart": chart, "high_priority": True} for chart in self.change.high_tier]
        return changes

    def searched_from(self) -> dict[str, Any]:
        """The levers the search read: the budget, and the weight of each org the change names."""
        rows = self.base.rows
        return {
            "budget": self.levers.budget,
            "weights": {rows[key].slug: self.levers.weights[key] for key in self.change.weights},
        }

    def answer(self, *, applied: bool) -> dict[str, Any]:
        """The API's answer: the change, before and after per org, the search's figures."""
        rows, before_plan = self.base.rows, self.base.before

        def stamp(seconds: float | None) -> str | None:
            moment = to_datetime(seconds)
            return moment.isoformat() if moment else None

        def side(risk: Risk, plan: PlanFigures, key: str) -> dict[str, Any]:
            return {
                "at_risk": risk.at_risk.get(key, 0),
                "late": risk.late.get(key, 0),
                "clear": stamp(plan.org_clear.get(key)),
            }

        keys = sorted(before_plan.org_clear.keys() | self.after_plan.org_clear.keys(), key=lambda key: rows[key].slug)
        return {
            "org": None if self.org is None else rows[self.org].slug,
            "change": self.what_if_changes(),
            "levers": self.change.levers,
            "at_risk_before": self.before.count(self.org),
            "at_risk_after": self.after.count(self.org),
            "orgs": {
                rows[key].slug: {
                    "before": side(self.before, before_plan, key),
                    "after": side(self.after, self.after_plan, key),
                }
                for key in keys
                if key in rows
            },
            "plans": self.plans,
            "max_plans": RESCUE_MAX_PLANS,
            "exhausted": self.exhausted,
            "searched_from": self.searched_from(),
            "applied": applied,
        }


def rescue_find(*, org: str | None = None, now: datetime | None = None) -> Rescue:
    """The smallest change that brings the at-risk count of org `org` (a slug; None: of every org) to
    zero or its least (`search`, over what-ifs of one snapshot); nothing is written."""
    base = what_if_base(now=now)
    dues = _dues(base.snapshot)
    config = base.snapshot.config
    key = None
    if org is not None:
        key = base.key_of.get(org)
        if key is None:
            raise InvalidInput(f"unknown org {org!r}", field="org")
    threshold = float(config.at_risk_threshold)
    levers = Levers(
        budget=int(config.budget),
        weights={row_key: row.weight for row_key, row in base.rows.items()},
        max_weight=int(config.rescue_max_weight),
        max_budget=config.rescue_max_budget,
    )
    plans: dict[tuple[Any, ...], PlanFigures] = {Change().key: base.before}

    def evaluate(change: Change) -> Risk:
        after = what_if_after(base, _what_if_changes(base, change))
        plans[change.key] = after.after
        return plan_risk(after.after, dues, threshold)

    before = plan_risk(base.before, dues, threshold)
    found = search(evaluate, levers=levers, before=before, org=key)
    after_plan = plans[found.change.key]
    return Rescue(key, base, levers, found.change, before, found.risk, after_plan, found.plans, found.exhausted)


def _what_if_changes(base: WhatIfBase, change: Change) -> dict[str, Any]:
    rows = base.rows
    changes: dict[str, Any] = {"weights": {rows[key].slug: weight for key, weight in change.weights.items()}}
    if change.budget is not None:
        changes["budget"] = change.budget
    if change.high_tier:
        changes["priorities"] = [{"chart": chart, "high_priority": True} for chart in change.high_tier]
    return changes


def rescue_apply(*, rescue: Rescue, actor: Actor, reason: str, searched_from: Mapping[str, Any] | None = None) -> None:
    """Pull the rescue's levers through their services (`orgs.services.org_weight_set`,
    `knobs.services.scheduler_config_set`, `charts.services.chart_prioritize`), each logged with
    `actor` and `reason`, in one transaction: all or nothing. The levers the search read (and those
    of `searched_from`, a preview's answer, when given) must be the stored ones, compared under the
    rows' locks: else Conflict (409) naming the lever (`weights.<slug>` or `budget`), nothing applied."""
    actor.staff_required(field="apply")
    if not reason.strip():
        raise InvalidInput("say why the rescue is applied", field="reason")
    expected_budget = rescue.levers.budget
    expected_weights = dict(rescue.searched_from()["weights"])
    if searched_from is not None:
        expected_budget = searched_from.get("budget", expected_budget)
        expected_weights.update(searched_from.get("weights", {}))
    rows = rescue.base.rows
    with transaction.atomic():
        SchedulerConfig.objects.get_or_create(id=1)
        config = SchedulerConfig.objects.select_for_update().get(id=1)
        if config.budget != expected_budget or config.budget != rescue.levers.budget:
            raise Conflict(
                f"the budget was changed since the rescue was searched: it is now {config.budget}; {NOTHING_APPLIED}",
                field="budget",
            )
        orgs = {org.slug: org for org in Org.objects.select_for_update().filter(slug__in=expected_weights)}
        for slug, weight in sorted(expected_weights.items()):
            org = orgs.get(slug)
            if org is None or org.weight != weight:
                now_weight = "gone" if org is None else org.weight
                raise Conflict(
                    f"the weight of {slug} was changed since the rescue was searched: it is now {now_weight};"
                    f" {NOTHING_APPLIED}",
                    field=f"weights.{slug}",
                )
        for key, weight in rescue.change.weights.items():
            slug = rows[key].slug
            org_weight_set(org=orgs[slug], weight=weight, actor=actor, reason=reason, expected=expected_weights[slug])
        if rescue.change.budget is not None:
            scheduler_config_set(actor=actor, reason=reason, budget=rescue.change.budget)
        charts = Chart.objects.in_bulk(list(rescue.change.high_tier))
        for chart_id in rescue.change.high_tier:
            chart = charts.get(chart_id)
            if chart is None:
                raise Conflict(f"chart {chart_id} is gone; {NOTHING_APPLIED}", field="change")
            chart_prioritize(chart=chart, high_priority=True, actor=actor, reason=reason)
