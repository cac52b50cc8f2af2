"""`plan`: the whole contract, from a scenario to its plan."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import chain, compress

import numpy as np
from numpy.typing import NDArray

from .forecast import (
    Forecast,
    eta_bands,
    expected_charts,
    forecast,
    late_chance,
    median_durations,
    median_last_finish,
    running_band,
    running_finish,
    spreads,
)
from .model import (
    Arrival,
    ChartId,
    ChartIds,
    ChartOrder,
    ChartValues,
    History,
    Plan,
    PlanArrays,
    QueueArrays,
    QueueColumns,
    RunningChart,
    Scenario,
    times_list,
)
from .order import DEFAULT_POLICY, Indices, fair_order_indices, org_codes
from .replay import ReplayInput, lanes_apply, replay
from .waiting import left_out_reasons, reason_names, waiting_reasons


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of the block (or of a call of the
    function it decorates).

    A plan allocates millions of small tuples and lists; each allocation burst would trigger a
    full collection that traverses every object the process holds (the scenario's charts
    included), which costs more than the plan itself. The plan creates no reference cycles.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@cyclic_gc_paused()
def plan(scenario: Scenario) -> Plan:
    """The plan of `scenario`: fair order, starts, ETAs, their bands, clear-times and why each chart
    waits.

    1. The queue, with the charts the scenario's `arrivals` foresee after the real ones (`_queue`).
    2. The fair order of the eligible queued charts (`fair_order_indices`).
    3. Their columns in that order; each chart occupies c = min(cost, budget) units. Running
       charts finish at max(now, started + avg), or with a spread at now plus their median time
       left given how long they have run (`forecast.running_finish`), for every replay (`_columns`).
    4. Starts and ETAs (start + avg), by the replay that applies (`replay.replay`: the reference
       walk, the lane simulation or the compiled one, the same starts and ETAs); with a spread
       known, each chart's ETA is its start plus its median duration (`_median_etas`).
    5. Why each chart waits, from the walk at `now` (`_waiting`): worked out on first use, so a
       caller that never asks (the plan command) never pays for it.
    6. The bands (`forecast.eta_bands`) when a spread or an arrival is known (`_bands`).
    7. The plan of the real charts only: times and reasons keyed by chart id, clear-times per org
       and overall, and each chart's chance of finishing after its due time (`_real_plan`).
    Every step past the replay works on whole numpy columns.
    """
    queue = _queue(scenario)
    queued_count = len(queue.columns)
    chart_org, org_names = org_codes([*queue.columns.org, *(chart.org for chart in scenario.running)])
    org_of = np.array(chart_org, dtype=np.intp)
    order = fair_order_indices(queue.columns, scenario, org_of[:queued_count], org_names)
    columns = _columns(scenario, queue.columns, order, org_of, org_names)
    starts, etas = replay(columns)
    start_time = np.array(starts, dtype=np.float64)  # None (never starts) becomes nan
    etas = _median_etas(queue, columns, start_time, etas)
    bands = _bands(scenario, queue, columns, start_time)
    return _real_plan(scenario, queue, columns, starts, etas, start_time, bands)


@dataclass(frozen=True, slots=True)
class _PlanQueue:
    """Step 1: the queued charts, the real ones (`real_count`, ids `real_ids`) first, then the expected
    ones, and the `spread` of each (0: none known)."""

    columns: QueueColumns
    real_count: int
    real_ids: Sequence[ChartId] | NDArray[np.int64]
    arrivals: list[Arrival]
    spread: NDArray[np.float64]
    foreseen: Forecast | None


@dataclass(frozen=True, slots=True)
class _Columns(ReplayInput):
    """Step 3: what the replay reads (`replay.ReplayInput`: the charts of the order, numbered 0..n-1
    in it, and the running charts), with the `order` itself, `chart_org` (the org code of each queued
    chart, then of each running chart) and the `org_names`; `avg` is in the scenario's time type
    (see `_time_type`).
    """

    order: Indices
    chart_org: Indices
    org_names: list[str]


@dataclass(frozen=True, slots=True)
class _Bands:
    """Step 6: the p10-p90 band of every ETA of the order (nan: no start) and of every running chart's
    finish, and the spreads they came from (`spread` of the charts of the order, `running_spread`)."""

    low: NDArray[np.float64]
    high: NDArray[np.float64]
    running_low: Sequence[float | None]
    running_high: Sequence[float | None]
    spread: NDArray[np.float64]
    running_spread: NDArray[np.float64]


def _queue(scenario: Scenario) -> _PlanQueue:
    """Step 1: the real queue, then the charts the `arrivals` (given, or foreseen from the
    `history`) are expected to add."""
    queue = QueueColumns.of(scenario.queued)
    real_count, real_ids = len(queue), queue.given("id")
    spread = spreads(scenario.spread, real_count)
    arrivals = list(scenario.arrivals)
    foreseen: Forecast | None = None
    if scenario.history is not None:
        foreseen = forecast(
            scenario.history, now=scenario.now, budget=scenario.budget,
            backlog=_backlog(queue.arrays, scenario.running, scenario.now, scenario.budget),
            typical_avg=_typical_avg(scenario.history, queue),
        )  # fmt: skip
        arrivals += foreseen.arrivals
    if arrivals:
        expected, expected_spread = expected_charts(
            arrivals, now=scenario.now, queued=real_count, first_key=_first_key_after(real_ids, scenario.running)
        )
        queue = queue.joined(expected)
        spread = np.concatenate((spread, expected_spread))
    return _PlanQueue(queue, real_count, real_ids, arrivals, spread, foreseen)


def _first_key_after(ids: Sequence[ChartId] | NDArray[np.int64], running: Sequence[RunningChart]) -> int | None:
    """An integer key above every chart's when the charts have integer keys, else None."""
    keys = [chart.id for chart in running]
    if isinstance(ids, np.ndarray):
        keys += [int(ids.max())] if len(ids) else []
    else:
        keys += ids
    integers = [key for key in keys if type(key) is int]
    return max(integers) + 1 if integers and len(integers) == len(keys) else None


def _columns(
    scenario: Scenario, queue: QueueColumns, order: Indices, chart_org: Indices, org_names: list[str]
) -> _Columns:
    """Step 3: the columns of the order and of the running charts, and which replay applies."""
    budget, now, running = scenario.budget, scenario.now, scenario.running
    queued_count, arrays = len(queue), queue.arrays
    org = chart_org[:queued_count][order]
    units = np.minimum(arrays.cost, budget)[order]
    caps = [scenario.orgs.get(name, DEFAULT_POLICY).max_concurrency for name in org_names]
    running_units = [min(chart.cost, budget) for chart in running]
    becomes_available = arrays.available_at > now  # nan (available now) is never later
    retry_marked = arrays.retry[order] if scenario.retry_budget is not None else None
    any_later = bool(becomes_available.any())
    lanes = lanes_apply(
        budget=budget, units=units, org=org, caps=caps, running_units=running_units, any_later=any_later,
        retry=retry_marked,
    )  # fmt: skip
    later, later_at, pending = _later_charts(queue, becomes_available, order)
    retry = retry_marked if retry_marked is not None and retry_marked.any() else None
    avg = arrays.avg.astype(_time_type(scenario, queue), copy=False)[order]
    return _Columns(
        now=now,
        budget=budget,
        retry_budget=scenario.retry_budget,
        running_retry=[chart.retry for chart in running],
        order=order,
        chart_org=chart_org,
        org_names=org_names,
        org=org,
        units=units,
        avg=avg.tolist(),
        avg_time=avg.astype(np.float64, copy=False),
        caps=caps,
        lanes=lanes,
        later=later,
        later_at=later_at,
        pending=pending,
        retry=retry,
        running_org=chart_org[queued_count:].tolist(),
        running_finish=[
            running_finish(now=now, started=chart.started, avg=chart.avg, sigma=sigma)
            for chart, sigma in zip(running, spreads(scenario.running_spread, len(running)).tolist(), strict=True)
        ],
        running_units=running_units,
    )


def _later_charts(
    queue: QueueColumns, becomes_available: NDArray[np.bool_], order: Indices
) -> tuple[Indices, NDArray[np.float64], list[tuple[float, int]]]:
    """The charts of the order available only after now: their positions in the order and their
    `available_at` as arrays, and as the (available_at, position) pairs the event replays take,
    each with the scenario's own time (an int stays an int: read from the column as given). In
    queue order; a chart outside the order is left out."""
    position = np.full(len(queue), -1, dtype=np.intp)
    position[order] = np.arange(len(order), dtype=np.intp)
    marked = becomes_available & (position >= 0)
    charts = np.flatnonzero(marked)
    later, later_at = position[charts], queue.arrays.available_at[charts]
    if not len(later):
        return later, later_at, []
    given = queue.given("available_at")
    ready_at: list[float] = (
        list(map(given.__getitem__, charts.tolist())) if isinstance(given, list) else later_at.tolist()
    )  # each has one
    return later, later_at, list(zip(ready_at, later.tolist(), strict=True))


def _median_etas(
    queue: _PlanQueue, columns: _Columns, start_time: NDArray[np.float64], etas: Sequence[float | None]
) -> Sequence[float | None]:
    """Step 4's ETAs where a spread is known: each chart's start plus its median duration
    (`forecast.median_durations`), half of its runs over by then; the replay's own (start + avg)
    where none is. The starts stay the replay's: a start is a sum of the durations before it,
    whose median is near the sum of their means, not of their medians, while the running
    charts' median times left set the first starts (`forecast.running_finish`)."""
    spread = queue.spread[columns.order]
    if not spread.any():
        return etas
    return times_list(start_time + median_durations(columns.avg_time, spread))


def _bands(scenario: Scenario, queue: _PlanQueue, columns: _Columns, start_time: NDArray[np.float64]) -> _Bands | None:
    """Step 6: the p10-p90 bands when a spread or an arrival is known (None: the ETAs themselves)."""
    if not (len(scenario.spread) or scenario.running_spread or queue.arrivals or queue.foreseen is not None):
        return None
    real_count, running = queue.real_count, scenario.running
    spread = queue.spread[columns.order]
    running_avg = [chart.avg for chart in running]
    running_spread = spreads(scenario.running_spread, len(running))
    bands = eta_bands(
        now=scenario.now, budget=scenario.budget, starts=start_time, avg=columns.avg_time, units=columns.units,
        spread=spread, expected=columns.order >= real_count, running_avg=running_avg,
        running_units=columns.running_units, running_spread=running_spread, arrivals=queue.arrivals,
        foreseen=queue.foreseen,
    )  # fmt: skip
    running_bands = running_band(
        now=scenario.now,
        started=[chart.started for chart in running],
        avg=running_avg,
        spread=running_spread.tolist(),
    )
    return _Bands(bands.low, bands.high, running_bands.low, running_bands.high, spread, running_spread)


def _real_plan(
    scenario: Scenario,
    queue: _PlanQueue,
    columns: _Columns,
    starts: Sequence[float | None],
    etas: Sequence[float | None],
    start_time: NDArray[np.float64],
    bands: _Bands | None,
) -> Plan:
    """Step 7: the plan of the real charts, keyed by chart id; the expected ones only shaped it.

    1. The plan's layout of chart ids: the real charts of the order, the real ones left out of
       it, the running ones; and each one's org (`layout_org`).
    2. Starts, ETAs and bands in that layout: the replay's own values (an int stays an int), None
       where a chart has none; also as float arrays, nan for None (`Plan.arrays`).
    3. Clear-times per org: the latest ETA and band edges (`_org_clear`); with spreads the median
       last finish (`forecast.median_last_finish`), never before the latest ETA, and the band's upper
       edge its p90, never before the latest p90. With expected charts, only orgs with a real chart get a key.
    4. Each chart's chance of finishing after its due time, when some chart has one (`_due`).
    5. Why each chart waits, on first use (`_waiting`).

    The ids and the lists of times are made on first read (`_Layout`): the replan writes the rows
    by the snapshot's own ids.
    """
    running = scenario.running
    real_count, queued_count = queue.real_count, len(queue.columns)
    org_names, chart_org = columns.org_names, columns.chart_org
    # Step 5's input, kept until it runs: the replay's columns without their lists of the queue's
    # size (`avg`, `pending`), so that a plan held unread keeps no such list alive but its own (and
    # the cyclic collector, which walks every list, has little to walk); the starts of the order.
    waiting_columns, waiting_starts = replace(columns, avg=[], pending=[]), start_time
    order, org, avg, eta_time = columns.order, columns.org, columns.avg_time, np.array(etas, dtype=np.float64)
    real: NDArray[np.bool_] | None = None
    if queued_count > real_count:  # the expected charts only shaped the real charts' times
        real = order < real_count
        order, org, avg, eta_time, start_time = order[real], org[real], avg[real], eta_time[real], start_time[real]
        if bands:
            bands = replace(bands, low=bands.low[real], high=bands.high[real], spread=bands.spread[real])

    left_out = np.ones(real_count, dtype=bool)
    left_out[order] = False
    left_out_charts = np.flatnonzero(left_out)
    laid = _Layout(len(order), len(left_out_charts), real, None if real is None else np.flatnonzero(real))
    laid_queued = np.concatenate((order, left_out_charts))
    chart_ids = laid.ids(queue.real_ids, laid_queued, [chart.id for chart in running])
    running_org = chart_org[queued_count:]
    layout_org = np.concatenate((org, chart_org[:real_count][left_out_charts], running_org))

    order_eta = eta_time
    eta_time, eta_value = laid.times(eta_time, etas, columns.running_finish)
    org_clear = org_clear_low = org_clear_high = _org_clear(org_names, layout_org, eta_time, eta_value)
    eta = eta_low = eta_high = laid.column(chart_ids, etas, columns.running_finish)
    low_time = high_time = eta_time
    running_started = [chart.started for chart in running]
    if bands:
        low_time, low_value = laid.times(bands.low, None, bands.running_low)
        high_time, high_value = laid.times(bands.high, None, bands.running_high)
        org_clear_low = _org_clear(org_names, layout_org, low_time, low_value)
        org_clear_high = _org_clear(org_names, layout_org, high_time, high_value)
        last_finish = functools.partial(
            median_last_finish, now=scenario.now, org=np.concatenate((org, running_org)),
            start=np.concatenate((start_time, np.array(running_started, dtype=np.float64))),
            avg=np.concatenate((avg, np.array([chart.avg for chart in running], dtype=np.float64))),
            spread=np.concatenate((bands.spread, bands.running_spread)), org_count=len(org_names),
            lasted=np.concatenate((np.zeros(len(start_time)), scenario.now - np.array(running_started, dtype=float))),
            eta=np.concatenate((order_eta, np.array(columns.running_finish, dtype=np.float64))),
        )  # fmt: skip
        org_clear = _median_clear(org_names, last_finish(), org_clear)
        org_clear_high = _median_clear(org_names, last_finish(quantile=0.9), org_clear_high)
        eta_low = laid.column(chart_ids, bands.low, bands.running_low)
        eta_high = laid.column(chart_ids, bands.high, bands.running_high)
    if queued_count > real_count:  # no key for an org that has only expected charts
        real_orgs = {org_names[code] for code in np.flatnonzero(np.bincount(layout_org, minlength=len(org_names)))}
        org_clear, org_clear_low, org_clear_high = (
            {name: clear for name, clear in clears.items() if name in real_orgs}
            for clears in (org_clear, org_clear_low, org_clear_high)
        )
    clear_times = [clear for clear in org_clear.values() if clear is not None]
    due = _due(queue, scenario.running, laid_queued)
    chance_time = (
        np.full(len(eta_time), np.nan)
        if due is None
        else late_chance(now=scenario.now, due=due, eta=eta_time, low=low_time, high=high_time)
    )
    weights = np.array([scenario.orgs.get(name, DEFAULT_POLICY).weight for name in org_names], dtype=np.int64)
    waiting = functools.cache(
        functools.partial(
            _waiting, waiting_columns, waiting_starts, weights, real_count, queue.real_ids, left_out_charts
        )
    )
    return Plan(
        order=ChartOrder(chart_ids, len(order)),
        start=laid.column(chart_ids, starts, running_started),
        eta=eta,
        org_clear=org_clear,
        global_clear=max(clear_times) if clear_times else None,
        eta_low=eta_low,
        eta_high=eta_high,
        org_clear_low=org_clear_low,
        org_clear_high=org_clear_high,
        reason=ChartValues(chart_ids, load=lambda: waiting()[0]),
        waiting_until=ChartValues(chart_ids, load=lambda: waiting()[1]),
        head_of_line=ChartValues(chart_ids, load=lambda: waiting()[2]),
        late_chance=ChartValues(chart_ids, load=lambda: times_list(chance_time)),
        arrays=PlanArrays(
            queued=laid_queued,
            start=laid.times(start_time, None, running_started)[0],
            eta=eta_time,
            eta_low=low_time,
            eta_high=high_time,
            late_chance=chance_time,
        ),
        due_times=due is not None,
    )


def _due(queue: _PlanQueue, running: Sequence[RunningChart], laid_queued: Indices) -> NDArray[np.float64] | None:
    """Step 7's due time of each chart of the layout (nan: none), read from the queue (`laid_queued`:
    the layout's queued charts) and the running charts; None when no chart has one."""
    queued_due = queue.columns.arrays.due[: queue.real_count]
    running_due = [chart.due for chart in running]
    if np.isnan(queued_due).all() and running_due.count(None) == len(running_due):
        return None
    return np.concatenate((queued_due[laid_queued], np.array(running_due, dtype=np.float64)))


@dataclass(frozen=True, slots=True)
class _Layout:
    """The plan's layout (step 7): the `planned` real charts of the order, the `left_out` real
    charts, then the running ones. `real`: which charts of the replay are real (None: all), whose
    values alone are laid out; `real_place`: their places in the replay."""

    planned: int
    left_out: int
    real: NDArray[np.bool_] | None
    real_place: Indices | None

    def ids(
        self, queued_id: Sequence[ChartId] | NDArray[np.int64], queued: Indices, running_id: list[ChartId]
    ) -> ChartIds:
        """The plan's ids, listed on first use: the queued charts' (`queued_id` of each of `queued`,
        the layout's queued charts), then the running ones'."""

        def listed() -> list[ChartId]:
            given = queued_id if isinstance(queued_id, np.ndarray) else np.array(queued_id, dtype=object)
            ids: list[ChartId] = given[queued].tolist()
            ids += running_id
            return ids

        return ChartIds(listed, len(queued) + len(running_id))

    def times(
        self, planned: NDArray[np.float64], values: Sequence[float | None] | None, running: Sequence[float | None]
    ) -> tuple[NDArray[np.float64], Callable[[int], float | None]]:
        """The times of the layout as floats (nan for none), and each one's own value by its place:
        the replay's (`values`, of every chart of the replay; None: the floats of `planned`), None
        for a chart left out, a running chart's own."""
        laid = np.concatenate((planned, np.full(self.left_out, np.nan), np.array(running, dtype=np.float64)))
        first_running = self.planned + self.left_out

        def value(place: int) -> float | None:
            if place >= first_running:
                return running[place - first_running]
            if place >= self.planned:
                return None
            if values is None:
                return None if np.isnan(planned[place]) else float(planned[place])
            return values[place] if self.real_place is None else values[int(self.real_place[place])]

        return laid, value

    def column(
        self,
        ids: ChartIds,
        values: Sequence[float | None] | NDArray[np.float64],
        running: Sequence[float | None],
    ) -> ChartValues[float | None]:
        """A time per chart of the layout, listed on first read: the replay's own values (or the
        floats of an array of the real charts, None for nan), None for a chart left out, a running
        chart's own."""
        real = self.real

        def listed() -> list[float | None]:
            times: Sequence[float | None]
            if isinstance(values, np.ndarray):
                times = times_list(values)
            else:
                times = values if real is None else list(compress(values, real.tolist()))
            return [*times, *([None] * self.left_out), *running]

        return ChartValues(ids, load=listed)


# Why each chart waits (step 5): reason, until and head of line, in the plan's layout.
_WaitingLists = tuple[list[str | None], list[float | None], list[ChartId | None]]


@cyclic_gc_paused()  # as `plan`: millions of small objects, no cycles
def _waiting(
    columns: _Columns,
    start_time: NDArray[np.float64],
    weights: NDArray[np.int64],
    real_count: int,
    chart_id: Sequence[ChartId] | NDArray[np.int64],
    left_out: Indices,
) -> _WaitingLists:
    """Step 5: each chart's reason, until and head of line, laid out as the plan's ids (the real
    charts of the order, then the ones left out, then the running ones); `weights`: each org's.

    1. The charts of the order, expected ones included (they shaped the walk), get their verdict
       at `now` (`waiting.waiting_reasons`); then the expected ones are dropped.
    2. A chart left out of the order: `org_held` when its org's weight is 0, else `chart_paused`.
    3. A running chart has none.
    """
    order = columns.order
    waiting = waiting_reasons(columns, start_time)
    code, until, behind_head = waiting.code, waiting.until, waiting.behind_head
    head = int(order[waiting.head]) if waiting.head >= 0 else real_count
    head_id = _plain_id(chart_id[head]) if head < real_count else None  # an expected chart has no id to name
    real = order < real_count
    if not real.all():
        code, until, behind_head = code[real], until[real], behind_head[real]
    head_of_line = np.full(len(code), None, dtype=object)
    head_of_line[behind_head] = head_id
    held = weights[columns.chart_org[left_out]] == 0
    not_planned = [None] * len(left_out)
    not_running = [None] * len(columns.running_finish)
    return (
        [*reason_names(code), *left_out_reasons(held), *not_running],
        [*times_list(until), *not_planned, *not_running],
        [*head_of_line.tolist(), *not_planned, *not_running],
    )


def _plain_id(chart_id: ChartId | np.int64) -> ChartId:
    """A chart id as a str or an int (an int64 read from an array of keys is made an int)."""
    return int(chart_id) if isinstance(chart_id, np.integer) else chart_id


def _backlog(queue: QueueArrays, running: Sequence[RunningChart], now: float, budget: int) -> float:
    """Seconds the pool takes to run what is queued and what is left of what runs, at full budget."""
    work = float(np.dot(np.minimum(queue.cost, budget), queue.avg.astype(np.float64, copy=False)))
    work += sum(min(c.cost, budget) * max(0.0, c.started + c.avg - now) for c in running)
    return work / budget


def _median_clear(
    org_names: Sequence[str], last: NDArray[np.float64], org_clear: dict[str, float | None]
) -> dict[str, float | None]:
    """Each org's latest ETA (or p90), raised to the median (or p90) of its last finish where later
    (`last`, `forecast.median_last_finish`): as it is where none of its charts spreads."""
    clear = dict(org_clear)
    for name, finish in zip(org_names, last.tolist(), strict=True):
        latest = org_clear.get(name)
        if latest is not None and finish > latest:  # nan (no spread) is never later
            clear[name] = finish
    return clear


def _typical_avg(history: History, queue: QueueColumns) -> float:
    """The mean expected duration of the charts submitted lately (of the queue if none)."""
    count = sum(submission.count for submission in history.submissions)
    if count:
        return sum(submission.avg * submission.count for submission in history.submissions) / count
    return sum(queue.avg) / len(queue) if len(queue) else 0.0


def _time_type(scenario: Scenario, queue: QueueColumns) -> type[np.generic]:
    """Integers when every time of the scenario is an integer (so the plan's times stay
    integers), floats otherwise: the arithmetic is exact either way. (The columns are read last:
    `avg` by the type of its array, made int64 only from ints; `available_at` value by value when
    given as a list, stopping at the first float.)"""
    times = chain((scenario.now,), (t for chart in scenario.running for t in (chart.started, chart.avg)))
    if not all(type(time) is int for time in times) or queue.arrays.avg.dtype.kind != "i":
        return np.float64
    available_at = queue.given("available_at")
    if isinstance(available_at, list):
        whole = all(type(ready_at) is int for ready_at in available_at if ready_at is not None)
    else:
        whole = available_at.dtype.kind == "i" or bool(np.isnan(available_at).all())
    return np.int64 if whole else np.float64


def _org_clear(
    org_names: Sequence[str],
    finish_org: Indices,
    finish_time: NDArray[np.float64],
    finish: Callable[[int], float | None],
) -> dict[str, float | None]:
    """The latest finish per org, None for an org without one.

    The maximum is found on floats (`finish_time`, nan for none, which fmax ignores); the value
    reported is the chart's own (`finish` of its place in `finish_time`: an int stays an int).
    """
    latest = np.full(len(org_names), -np.inf)
    np.fmax.at(latest, finish_org, finish_time)
    is_latest = finish_time == latest[finish_org]
    latest_finish = np.full(len(org_names), -1, dtype=np.intp)
    latest_finish[finish_org[is_latest]] = np.flatnonzero(is_latest)
    places = latest_finish.tolist()
    return {name: None if place < 0 else finish(place) for name, place in zip(org_names, places, strict=True)}
