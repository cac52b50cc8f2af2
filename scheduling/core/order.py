"""The fair order of the contract: which eligible chart comes before which.

The sorts run on numpy arrays of the numeric keys; the final tie-break, the chart id (a string, or
the live system's integer key), puts charts whose numeric keys tie in id order afterwards (in
practice a few short runs).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from itertools import islice
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .model import Aging, ChartId, OrgPolicy, Policy, QueueColumns, QueuedChart, Scenario

DEFAULT_POLICY = OrgPolicy()

Indices = NDArray[np.intp]


def fair_order(scenario: Scenario) -> list[QueuedChart]:
    """The eligible queued charts of `scenario` (the same objects), in the fair order."""
    queue = QueueColumns.of(scenario.queued)
    chart_org, org_names = org_codes(queue.org)
    order = fair_order_indices(queue, scenario, chart_org, org_names)
    return [scenario.queued[index] for index in order.tolist()]


def org_codes(names: Sequence[str]) -> tuple[list[int], list[str]]:
    """Number the orgs of `names` in order of first appearance: (code of each name, name of each code)."""
    codes: dict[str, int] = {}
    return [codes.setdefault(name, len(codes)) for name in names], list(codes)


def fair_order_indices(
    queue: QueueColumns, scenario: Scenario, chart_org: Sequence[int] | Indices, org_names: Sequence[str]
) -> Indices:
    """The indices into `queue` of the eligible charts, in the fair order (`SCHEDULING.md`).

    `chart_org` gives each chart's org as a code into `org_names` (see `org_codes`), as a list or an array.

    1. Eligible: not paused, and the org's weight is above 0; each chart's `effective_priority`.
    2. High tier by (created, id); the fair tier by (-effective priority, created, id)
       (`_sort_by_keys_then_id`).
    3. With `Scenario.due_first` (and some chart due), the charts of each class (the high tier's of
       one org, the fair tier's of one org and effective priority) take their class's places by
       due time (`_due_first`); the org and priority of every place are kept, so the rounds across
       orgs are the contract's.
    4. The round of each fair-tier chart (`_rounds`); the fair tier sorted stably by it (so by
       (round, -effective priority, created, id)), after the high tier.
    """
    org_of = np.asarray(chart_org, dtype=np.intp)
    weights = np.array([scenario.orgs.get(name, DEFAULT_POLICY).weight for name in org_names], dtype=np.int64)
    arrays = queue.arrays
    high, created = arrays.high_priority, arrays.created
    eligible = ~arrays.paused & (weights[org_of] > 0)
    priority = effective_priority(arrays.priority, scenario.now, scenario.aging, created)

    ids = queue.given("id")
    high_tier = _sort_by_keys_then_id(np.flatnonzero(eligible & high), [created], ids)
    by_priority = _sort_by_keys_then_id(np.flatnonzero(eligible & ~high), [-priority, created], ids)
    if scenario.due_first and not np.isnan(arrays.due).all():
        high_tier = _due_first(high_tier, arrays.due, [org_of])
        by_priority = _due_first(by_priority, arrays.due, [org_of, priority])
    served = np.array([scenario.orgs.get(name, DEFAULT_POLICY).served for name in org_names], dtype=np.float64)
    round_key = _rounds(by_priority, org_of, weights, _summable(arrays.cost), scenario.policy, scenario.quantum, served)
    fair_tier = by_priority[stable_argsort(round_key)]
    return np.concatenate((high_tier, fair_tier))


def _due_first(ordered: Indices, due: NDArray[np.float64], classes: Sequence[NDArray[Any]]) -> Indices:
    """`ordered` with the charts of each class (equal values in every one of `classes`) in their
    class's places, by due time: earliest first, none last, ties (and charts without one) in
    their order in `ordered`.

    1. The places of each class, in order: a stable sort of the places by class.
    2. The charts of each class by due time: a stable sort of the same places by (class, due).
    3. The k-th place of a class takes its k-th chart by due time.
    """
    class_keys = [key[ordered] for key in reversed(classes)]  # lexsort: the last key first
    places = np.lexsort(class_keys)
    by_due = np.lexsort([np.nan_to_num(due[ordered], nan=np.inf), *class_keys])
    reordered = ordered.copy()
    reordered[places] = ordered[by_due]
    return reordered


def effective_priority(
    priority: NDArray[np.int64], now: float, aging: Aging | None, created: NDArray[np.float64]
) -> NDArray[np.int64]:
    """Each chart's priority plus its capped waiting bonus."""
    if aging is None:
        return priority
    waited = np.maximum(0.0, now - created)
    bonus = np.minimum(float(aging.cap), np.floor(waited / aging.step))
    return priority + bonus.astype(np.int64)


def _summable(cost: NDArray[np.int64]) -> NDArray[Any]:
    """The costs in a type whose running sums are exact: int64 while the total stays below 2**63
    (bounded first by the largest cost times the count, and summed exactly only past that bound),
    else float64, which cannot overflow."""
    if not len(cost) or int(cost.max()) * len(cost) < 2**63 or sum(cost.tolist()) < 2**63:
        return cost
    return cost.astype(np.float64)


def _rounds(
    by_priority: Indices,
    chart_org: Indices,
    weights: NDArray[np.int64],
    cost: NDArray[Any],
    policy: Policy,
    quantum: float,
    served: NDArray[np.float64],
) -> NDArray[Any]:
    """A key per chart of `by_priority` (aligned with it) that sorts the charts by round.

    1. Group the charts by org, keeping their order inside each org (a stable sort by org).
    2. k = the chart's rank inside its org; S_k = the cost of the org's charts 0..k.
    3. round_robin: the round k // weight. deficit: ceil(S_k / (weight * quantum)), the round
       plus one, kept as a float: exact however large, and it sorts as the round does.
       An org's `served` (0 in the contract) is added to k or S_k first.
    4. Align back with `by_priority`.
    """
    org_of = chart_org[by_priority]
    grouping = stable_argsort(org_of)
    grouped_org = org_of[grouping]
    group_size = np.bincount(grouped_org, minlength=len(weights))
    group_start = np.cumsum(group_size) - group_size
    first_of_group = group_start[grouped_org]
    weight = weights[grouped_org]
    grouped_round: NDArray[Any]
    has_served = bool(served.any())
    if policy == "round_robin":
        rank_in_org = np.arange(len(grouped_org)) - first_of_group
        grouped_round = np.floor((rank_in_org + served[grouped_org]) / weight) if has_served else rank_in_org // weight
    else:
        grouped_cost = cost[by_priority][grouping]
        running_cost = np.cumsum(grouped_cost)
        spent = running_cost - (running_cost - grouped_cost)[first_of_group]
        if has_served:
            spent = spent + served[grouped_org]
        # A quantum so small that the quotient overflows puts the charts in one last round.
        with np.errstate(over="ignore"):
            grouped_round = np.ceil(spent / (weight * quantum))
    round_key = np.empty(len(by_priority), dtype=grouped_round.dtype)
    round_key[grouping] = grouped_round
    return round_key


def _sort_by_keys_then_id(
    charts: Indices, keys: Sequence[NDArray[np.generic]], ids: Sequence[ChartId] | NDArray[np.int64]
) -> Indices:
    """`charts` sorted by `keys` (most significant first), then by id.

    1. Sort stably by the least significant key, then by each more significant one: charts whose
       keys tie stay in queue order.
    2. Find the runs of neighbours whose keys are all equal.
    3. A run whose charts all lie in one stretch of the queue where the ids ascend is in id order
       already (`_ascending_stretches`); sort each other run by id.

    Step 3 is what makes a big backlog fast: its charts share whole seconds of `created`, and a queue
    read in id order, or nearly (a snapshot reads the table in its physical order, a scenario file
    lists its charts as written), leaves few runs to sort one by one.
    """
    key_columns = [key[charts] for key in keys]
    sorting = stable_argsort(key_columns[-1])
    for key_column in key_columns[-2::-1]:
        sorting = sorting[stable_argsort(key_column[sorting])]
    ordered = charts[sorting]
    if len(ordered) < 2:
        return ordered
    tied_with_next = np.ones(len(ordered) - 1, dtype=bool)
    for key_column in key_columns:
        sorted_column = key_column[sorting]
        tied_with_next &= sorted_column[1:] == sorted_column[:-1]
    if not tied_with_next.any():
        return ordered
    stretch = _ascending_stretches(ids)[ordered]
    out_of_stretch = np.concatenate(([0], np.cumsum(tied_with_next & (stretch[1:] != stretch[:-1]))))
    edges = np.diff(np.concatenate(([0], tied_with_next.view(np.int8), [0])))
    run_starts = np.flatnonzero(edges == 1)
    run_ends = np.flatnonzero(edges == -1) + 1
    unsorted = out_of_stretch[run_ends - 1] > out_of_stretch[run_starts]
    if not unsorted.any():
        return ordered
    # On a list: cheaper than a numpy slice read and written per run.
    in_order = ordered.tolist()
    by_id = ids.__getitem__
    for run_start, run_end in zip(run_starts[unsorted].tolist(), run_ends[unsorted].tolist(), strict=True):
        in_order[run_start:run_end] = sorted(in_order[run_start:run_end], key=by_id)
    return np.array(in_order, dtype=np.intp)


def _ascending_stretches(ids: Sequence[ChartId] | NDArray[np.int64]) -> Indices:
    """The number of each chart's stretch of the queue: a new stretch begins wherever an id is not
    greater than the one before it, so within a stretch queue order is id order. (One C pass of
    comparisons.)"""
    if len(ids) < 2:
        return np.zeros(len(ids), dtype=np.intp)
    if isinstance(ids, np.ndarray):
        ascends = ids[1:] > ids[:-1]
    else:
        ascends = np.fromiter(map(operator.lt, ids, islice(ids, 1, None)), dtype=np.bool_, count=len(ids) - 1)
    return np.concatenate(([0], np.cumsum(~ascends))).astype(np.intp)


def stable_argsort(keys: NDArray[Any]) -> Indices:
    """The indices that sort `keys` stably (as `np.argsort(keys, kind="stable")`).

    Whole-number keys that span less than 2**32 (round numbers, priorities, org codes) are sorted
    as offsets from the least key, in 16-bit halves, low half first then stably by the high half:
    numpy's stable sort of 16-bit integers is a radix sort, faster on many keys than the timsort it
    uses for wider ones. Other numeric keys without NaN (the creation times once expected charts
    join the queue, a fraction of a second apart) are ranked (`_ranked_argsort`), faster than that
    timsort; the rest take it.
    """
    if len(keys) == 0 or keys.dtype.kind not in "iuf":
        return np.argsort(keys, kind="stable")
    least, most = keys.min(), keys.max()
    if keys.dtype.kind == "f":
        if np.isnan(least) or np.isnan(most):  # NaN sorts last and ties with nothing: the timsort's
            return np.argsort(keys, kind="stable")
        whole = np.isfinite(least) and np.isfinite(most) and bool((keys == np.floor(keys)).all())
        span = float(most) - float(least) if whole else math.inf  # rounded correctly: >= 2**32 if it is
    else:
        span = int(most) - int(least)
    if span >= 2**32:
        return _ranked_argsort(keys)
    # Exact: whole numbers less than 2**32 apart (so is a difference of whole floats).
    offsets = (keys - least).astype(np.uint32)
    low_first = np.argsort(offsets.astype(np.uint16), kind="stable")
    if span < 2**16:
        return low_first
    return low_first[np.argsort((offsets[low_first] >> 16).astype(np.uint16), kind="stable")]


def _ranked_argsort(keys: NDArray[Any]) -> Indices:
    """The stable argsort of keys without NaN, from two unstable sorts (numpy's vectorised ones):

    1. Sort the keys, unstably; number the distinct values in that order (equal keys, -0.0 and
       0.0 among them, share a rank).
    2. Sort rank x n + index, unique integers: equal keys come out in index order, which is
       the stable order. (rank, index < n, so the product stays far within int64.)
    """
    count = len(keys)
    unstable = np.argsort(keys)
    ordered = keys[unstable]
    rank = np.empty(count, dtype=np.int64)
    rank[0] = 0
    np.cumsum(ordered[1:] != ordered[:-1], out=rank[1:])
    rank *= count
    rank += unstable
    rank.sort()
    return rank % count
