"""`plan`: the whole contract, from a scenario to its plan."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from .dispatcher import Dispatcher
from .forecast import Forecast, eta_bands, expected_charts, forecast, median_last_finish, running_band, spreads
from .lanes import lane_replay
from .model import (
    QUEUED_FIELDS,
    Arrival,
    ChartIds,
    ChartTimes,
    History,
    LazyChartValues,
    Plan,
    QueueColumns,
    RunningChart,
    Scenario,
)
from .order import DEFAULT_POLICY, Indices, column, fair_order_indices, org_codes
from .org_replay import later_charts, org_replay
from .replay import EventReplay
from .waiting import left_out_reasons, waiting_reasons

# The lanes hold one entry per budget unit (seeded from one per unit held by a running chart), and a
# chart of c units moves c of them: past these sizes the event replay, whose work grows with neither,
# is the faster of the two exact replays.
LANE_UNITS_LIMIT = 4096
LANE_MEAN_UNITS_LIMIT = 4

Value = TypeVar("Value")


def plan(scenario: Scenario) -> Plan:
    """The plan of `scenario`: fair order, starts, ETAs and clear-times (see `_plan`)."""
    with cyclic_gc_paused():
        return _plan(scenario)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of the block.

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


def _plan(scenario: Scenario) -> Plan:
    """The plan of `scenario`: fair order, starts, ETAs, their bands, clear-times and why each chart
    waits.

    1. The queue, with the charts the scenario's `arrivals` foresee after the real ones (`_queue`).
    2. The fair order of the eligible queued charts (`fair_order_indices`).
    3. Their columns in that order; each chart occupies c = min(cost, budget) units. Running
       charts finish at max(now, started + avg) (`_columns`).
    4. Starts and ETAs (start + avg): the lane simulation where no cap, later `available_at` or
       retry budget can touch a chart of the order (and the lanes stay small), else the event
       replay: `org_replay` when no retry budget applies to a chart of the order, `EventReplay` when
       one does (`_replay`).
    5. Why each chart waits, from the walk at `now` (`_waiting`): worked out on first use, so a
       caller that never asks (the plan command) never pays for it.
    6. The bands (`forecast.eta_bands`) when a spread or an arrival is known (`_bands`).
    7. The plan of the real charts only: times and reasons keyed by chart id (the charts of the
       order first, then the ones left out, then the running ones), clear-times per org and overall
       (`_real_plan`).
    """
    queue = _queue(scenario)
    queued_count = len(queue.columns)
    chart_org, org_names = org_codes([*queue.columns.org, *(chart.org for chart in scenario.running)])
    order = fair_order_indices(queue.columns, scenario, chart_org[:queued_count], org_names)
    columns = _columns(scenario, queue.columns, order, chart_org, org_names)
    starts, etas = _replay(scenario, queue.columns, columns)
    bands = _bands(scenario, queue, columns, starts, etas)
    return _real_plan(scenario, queue, columns, starts, etas, bands)


@dataclass(frozen=True, slots=True)
class _Queue:
    """Step 1: the queued charts, the real ones (`real_count`) first, then the expected ones."""

    columns: QueueColumns
    real_count: int
    arrivals: list[Arrival]
    expected_spread: list[float]
    foreseen: Forecast | None


@dataclass(frozen=True, slots=True)
class _Columns:
    """Step 3: the charts of the order (numbered 0..n-1 in it) and the running charts, as columns.

    `pending`: (available_at, chart) of the charts available only after now (empty on the lane
    path, which none reaches). `retry`: the retry marks when a retry budget applies to a chart of
    the order, else None.
    """

    order: Indices
    chart_org: list[int]
    org_names: list[str]
    org: Indices
    units: NDArray[np.int64]
    avg: list[float]
    caps: list[int | None]
    lanes: bool
    pending: list[tuple[float, int]]
    retry: NDArray[np.bool_] | None
    running_org: list[int]
    running_finish: list[float]
    running_units: list[int]


@dataclass(frozen=True, slots=True)
class _Bands:
    """Step 6: the p10-p90 band of every ETA of the order and of every running chart's finish, and
    the spreads they came from (`spread` of the charts of the order, `running_spread`)."""

    lows: Sequence[float | None]
    highs: Sequence[float | None]
    running_low: Sequence[float | None]
    running_high: Sequence[float | None]
    spread: list[float]
    running_spread: list[float]


def _queue(scenario: Scenario) -> _Queue:
    """Step 1: the real queue, then the charts the `arrivals` (given, or foreseen from the
    `history`) are expected to add."""
    queue = QueueColumns.of(scenario.queued)
    real_count = len(queue)
    expected_spread: list[float] = []
    arrivals = list(scenario.arrivals)
    foreseen: Forecast | None = None
    if scenario.history is not None:
        foreseen = forecast(
            scenario.history, now=scenario.now, budget=scenario.budget,
            backlog=_backlog(queue, scenario.running, scenario.now, scenario.budget),
            typical_avg=_typical_avg(scenario.history, queue),
        )  # fmt: skip
        arrivals += foreseen.arrivals
    if arrivals:
        expected, expected_spread = expected_charts(arrivals, now=scenario.now, queued=real_count)
        queue = _joined(queue, expected)
    return _Queue(queue, real_count, arrivals, expected_spread, foreseen)


def _columns(
    scenario: Scenario, queue: QueueColumns, order: Indices, chart_org: list[int], org_names: list[str]
) -> _Columns:
    """Step 3: the columns of the order and of the running charts, and which replay applies."""
    budget, now, running = scenario.budget, scenario.now, scenario.running
    queued_count = len(queue)
    org = column(chart_org[:queued_count], np.intp)[order]
    units = np.minimum(column(queue.cost, np.int64), budget)[order]
    caps = [scenario.orgs.get(name, DEFAULT_POLICY).max_concurrency for name in org_names]
    running_units = [min(chart.cost, budget) for chart in running]
    lanes = _lanes_apply(scenario, queue, order, units, org, caps, running_units)
    retry = None
    if scenario.retry_budget is not None:
        marked = column(queue.retry, np.bool_)[order]
        retry = marked if marked.any() else None
    return _Columns(
        order=order,
        chart_org=chart_org,
        org_names=org_names,
        org=org,
        units=units,
        avg=column(queue.avg, _time_type(scenario, queue))[order].tolist(),
        caps=caps,
        lanes=lanes,
        pending=[] if lanes else later_charts(queue.available_at, order, now),
        retry=retry,
        running_org=chart_org[queued_count:],
        running_finish=[max(now, chart.started + chart.avg) for chart in running],
        running_units=running_units,
    )


def _replay(
    scenario: Scenario, queue: QueueColumns, columns: _Columns
) -> tuple[Sequence[float | None], Sequence[float | None]]:
    """Step 4: the start and ETA of each chart of the order, by the fastest exact replay that applies."""
    budget, now = scenario.budget, scenario.now
    if columns.lanes:
        return lane_replay(
            now=now,
            budget=budget,
            running_finish=columns.running_finish,
            running_units=columns.running_units,
            units=columns.units.tolist(),
            avg=columns.avg,
        )
    if columns.retry is None:
        return org_replay(
            now=now,
            budget=budget,
            caps=columns.caps,
            org=columns.org,
            units=columns.units.tolist(),
            avg=columns.avg,
            pending=columns.pending,
            running_finish=columns.running_finish,
            running_org=columns.running_org,
            running_units=columns.running_units,
        )
    dispatcher = Dispatcher(
        budget=budget,
        caps=columns.caps,
        org=columns.org.tolist(),
        units=columns.units.tolist(),
        available_at=in_order(queue.available_at, columns.order),
        retry=columns.retry.tolist(),
        retry_budget=scenario.retry_budget,
    )
    return EventReplay(
        dispatcher,
        now=now,
        avg=columns.avg,
        org_count=len(columns.org_names),
        running_finish=columns.running_finish,
        running_org=columns.running_org,
        running_units=columns.running_units,
        running_retry=[chart.retry for chart in scenario.running],
    ).run()


def _bands(
    scenario: Scenario, queue: _Queue, columns: _Columns, starts: Sequence[float | None], etas: Sequence[float | None]
) -> _Bands | None:
    """Step 6: the p10-p90 bands when a spread or an arrival is known (None: the ETAs themselves)."""
    if not (scenario.spread or scenario.running_spread or queue.arrivals or queue.foreseen is not None):
        return None
    real_count, running = queue.real_count, scenario.running
    spread = np.array(spreads(scenario.spread, real_count) + queue.expected_spread)[columns.order]
    running_avg = [chart.avg for chart in running]
    running_spread = spreads(scenario.running_spread, len(running))
    bands = eta_bands(
        now=scenario.now, budget=scenario.budget, starts=starts, avg=columns.avg, units=columns.units.tolist(),
        spread=spread.tolist(), expected=(columns.order >= real_count).tolist(), running_avg=running_avg,
        running_units=columns.running_units, running_spread=running_spread, arrivals=queue.arrivals,
        foreseen=queue.foreseen,
    )  # fmt: skip
    running_bands = running_band(
        now=scenario.now, started=[chart.started for chart in running], avg=running_avg, spread=running_spread
    )
    return _Bands(bands.low, bands.high, running_bands.low, running_bands.high, spread.tolist(), running_spread)


def _real_plan(
    scenario: Scenario,
    queue: _Queue,
    columns: _Columns,
    starts: Sequence[float | None],
    etas: Sequence[float | None],
    bands: _Bands | None,
) -> Plan:
    """Step 7: the plan of the real charts, keyed by chart id; the expected ones only shaped it."""
    running = scenario.running
    real_count, queued_count = queue.real_count, len(queue.columns)
    order, org, org_names, chart_org = columns.order, columns.org, columns.org_names, columns.chart_org
    lows, highs = (bands.lows, bands.highs) if bands else (etas, etas)
    avg, spread = columns.avg, bands.spread if bands else []
    all_starts = starts
    if queued_count > real_count:  # the expected charts only shaped the real charts' times
        real = (order < real_count).tolist()
        order, org = order[order < real_count], org[order < real_count]
        starts, etas, lows, highs = (list(compress(times, real)) for times in (starts, etas, lows, highs))
        avg, spread = list(compress(avg, real)), list(compress(spread, real))

    left_out = np.ones(real_count, dtype=bool)
    left_out[order] = False
    left_out_charts = np.flatnonzero(left_out)
    order_ids = in_order(queue.columns.id, order)
    ids = [*order_ids, *in_order(queue.columns.id, left_out_charts), *(c.id for c in running)]
    chart_ids = ChartIds(ids)
    not_planned = [None] * (real_count - len(order))
    running_finish = columns.running_finish
    finish_org = np.concatenate((org, column(chart_org[queued_count:], np.intp)))
    org_clear = _org_clear(org_names, finish_org, [*etas, *running_finish])
    clear_times = [clear for clear in org_clear.values() if clear is not None]
    eta = ChartTimes(chart_ids, [*etas, *not_planned, *running_finish])
    waiting = _Waiting(lambda: _waiting(scenario, queue, columns, all_starts, left_out_charts))
    org_clear_low = org_clear_high = org_clear
    if bands:
        org_clear_low = _org_clear(org_names, finish_org, [*lows, *bands.running_low])
        org_clear_high = _org_clear(org_names, finish_org, [*highs, *bands.running_high])
        last = median_last_finish(
            now=scenario.now, org=finish_org, start=[*starts, *(chart.started for chart in running)],
            avg=[*avg, *(chart.avg for chart in running)], spread=[*spread, *bands.running_spread],
            org_count=len(org_names),
        )  # fmt: skip
        org_clear = _median_clear(org_names, last, org_clear)
        org_clear_high = {name: _later(high, org_clear[name]) for name, high in org_clear_high.items()}
        clear_times = [clear for clear in org_clear.values() if clear is not None]
    if queued_count > real_count:  # no key for an org that has only expected charts
        real_orgs = {org_names[code] for code in (*chart_org[:real_count], *chart_org[queued_count:])}
        org_clear, org_clear_low, org_clear_high = (
            {name: clear for name, clear in clears.items() if name in real_orgs}
            for clears in (org_clear, org_clear_low, org_clear_high)
        )
        clear_times = [clear for clear in org_clear.values() if clear is not None]
    return Plan(
        order=order_ids,
        start=ChartTimes(chart_ids, [*starts, *not_planned, *(chart.started for chart in running)]),
        eta=eta,
        org_clear=org_clear,
        global_clear=max(clear_times) if clear_times else None,
        eta_low=ChartTimes(chart_ids, [*lows, *not_planned, *bands.running_low]) if bands else eta,
        eta_high=ChartTimes(chart_ids, [*highs, *not_planned, *bands.running_high]) if bands else eta,
        org_clear_low=org_clear_low,
        org_clear_high=org_clear_high,
        reason=LazyChartValues(chart_ids, lambda: waiting.columns()[0]),
        waiting_until=LazyChartValues(chart_ids, lambda: waiting.columns()[1]),
        head_of_line=LazyChartValues(chart_ids, lambda: waiting.columns()[2]),
    )


class _Waiting:
    """Step 5's columns, worked out once on first use (`load`): reason, until and head of line."""

    __slots__ = ("_columns", "_load")

    def __init__(self, load: Callable[[], tuple[list[str | None], list[float | None], list[str | None]]]) -> None:
        self._load: Callable[[], tuple[list[str | None], list[float | None], list[str | None]]] | None = load
        self._columns: tuple[list[str | None], list[float | None], list[str | None]] | None = None

    def columns(self) -> tuple[list[str | None], list[float | None], list[str | None]]:
        if self._columns is None:
            assert self._load is not None
            with cyclic_gc_paused():  # as in `plan`: millions of small objects, no cycles
                self._columns, self._load = self._load(), None
        return self._columns


def _waiting(
    scenario: Scenario,
    queue: _Queue,
    columns: _Columns,
    starts: Sequence[float | None],
    left_out: Indices,
) -> tuple[list[str | None], list[float | None], list[str | None]]:
    """Step 5: each chart's reason, until and head of line, laid out as the plan's ids (the real
    charts of the order, then the ones left out, then the running ones).

    1. The charts of the order, expected ones included (they shaped the walk), get their verdict
       at `now` (`waiting.waiting_reasons`); then the expected ones are dropped.
    2. A chart left out of the order: `org_held` when its org's weight is 0, else `chart_paused`.
    3. A running chart has none.
    """
    real_count, order = queue.real_count, columns.order
    waiting = waiting_reasons(
        now=scenario.now, budget=scenario.budget, starts=starts, org=columns.org, units=columns.units,
        caps=columns.caps, pending=columns.pending, retry=columns.retry, retry_budget=scenario.retry_budget,
        running_finish=columns.running_finish, running_org=columns.running_org,
        running_units=columns.running_units, running_retry=[chart.retry for chart in scenario.running],
    )  # fmt: skip
    reasons = waiting.names()
    until = _times(waiting.until)
    head = int(order[waiting.head]) if waiting.head >= 0 else real_count
    head_id = queue.columns.id[head] if head < real_count else None  # an expected chart has no id to name
    head_of_line: list[str | None] = [None] * len(order)
    for chart in np.flatnonzero(waiting.behind_head).tolist():
        head_of_line[chart] = head_id
    if len(queue.columns) > real_count:
        real = (order < real_count).tolist()
        reasons, head_of_line = list(compress(reasons, real)), list(compress(head_of_line, real))
        until = list(compress(until, real))
    weights = np.array([scenario.orgs.get(name, DEFAULT_POLICY).weight for name in columns.org_names], dtype=np.int64)
    held = weights[column(columns.chart_org[:real_count], np.intp)[left_out]] == 0
    not_planned = [None] * len(left_out)
    not_running = [None] * len(scenario.running)
    return (
        [*reasons, *left_out_reasons(held), *not_running],
        [*until, *not_planned, *not_running],
        [*head_of_line, *not_planned, *not_running],
    )


def _times(times: NDArray[np.float64]) -> list[float | None]:
    """The times as floats, None for nan."""
    values = times.astype(object)
    values[np.isnan(times)] = None
    return values.tolist()  # type: ignore[no-any-return]


def _backlog(queue: QueueColumns, running: Sequence[RunningChart], now: float, budget: int) -> float:
    """Seconds the pool takes to run what is queued and what is left of what runs, at full budget."""
    work = float(np.dot(np.minimum(column(queue.cost, np.int64), budget), column(queue.avg, np.float64)))
    work += sum(min(c.cost, budget) * max(0.0, c.started + c.avg - now) for c in running)
    return work / budget


def _median_clear(
    org_names: Sequence[str], last: NDArray[np.float64], org_clear: dict[str, float | None]
) -> dict[str, float | None]:
    """Each org's clear-time when its charts' durations spread: its median last finish (`last`,
    `forecast.median_last_finish`), never before its latest ETA; its latest ETA where none spreads."""
    clear = dict(org_clear)
    for name, finish in zip(org_names, last.tolist(), strict=True):
        latest = org_clear.get(name)
        if latest is not None and finish > latest:  # nan (no spread) is never later
            clear[name] = finish
    return clear


def _later(first: float | None, second: float | None) -> float | None:
    """The later of two times, None if either is None."""
    return None if first is None or second is None else max(first, second)


def _typical_avg(history: History, queue: QueueColumns) -> float:
    """The mean expected duration of the charts submitted lately (of the queue if none)."""
    count = sum(submission.count for submission in history.submissions)
    if count:
        return sum(submission.avg * submission.count for submission in history.submissions) / count
    return sum(queue.avg) / len(queue) if len(queue) else 0.0


def _joined(queue: QueueColumns, more: QueueColumns) -> QueueColumns:
    """The columns of `queue` followed by those of `more`."""
    return QueueColumns(*(getattr(queue, name) + getattr(more, name) for name in QUEUED_FIELDS))


def in_order(values: Sequence[Value], order: Indices) -> list[Value]:
    """values[i] for each i of `order` (the values themselves: an int stays an int)."""
    return np.array(values, dtype=object)[order].tolist()  # type: ignore[no-any-return]


def _time_type(scenario: Scenario, queue: QueueColumns) -> type[np.generic]:
    """Integers when every time of the scenario is an integer (so the plan's times stay
    integers), floats otherwise: the arithmetic is exact either way."""
    times = [scenario.now, *(t for chart in scenario.running for t in (chart.started, chart.avg))]
    times += [ready_at for ready_at in set(queue.available_at) if ready_at is not None]
    if all(type(time) is int for time in times) and all(type(avg) is int for avg in queue.avg):
        return np.int64
    return np.float64


def _lanes_apply(
    scenario: Scenario,
    queue: QueueColumns,
    order: Indices,
    units: NDArray[np.int64],
    org: Indices,
    caps: Sequence[int | None],
    running_units: Sequence[int],
) -> bool:
    """Whether the lane simulation replays the charts of the order, and pays (see `plan`, step 3).

    1. The lanes stay small: the budget and the units held by running charts, and the mean
       units of a chart.
    2. No org of a chart of the order has a cap; no queued chart becomes available later; no
       chart of the order is a retry under a retry budget.
    """
    if max(scenario.budget, sum(running_units)) > LANE_UNITS_LIMIT:
        return False
    if units.sum() > LANE_MEAN_UNITS_LIMIT * len(units):
        return False
    capped_org = np.array([cap is not None for cap in caps], dtype=bool)
    if capped_org[org].any():
        return False
    now = scenario.now
    if any(ready_at is not None and ready_at > now for ready_at in set(queue.available_at)):
        return False
    return scenario.retry_budget is None or not column(queue.retry, np.bool_)[order].any()


def _org_clear(
    org_names: Sequence[str], finish_org: Indices, finishes: Sequence[float | None]
) -> dict[str, float | None]:
    """The latest finish per org, None for an org without one.

    The maximum is found on floats; the value reported is the chart's own (an int stays an int).
    """
    finish_time = np.array(finishes, dtype=np.float64)  # None becomes nan, which fmax ignores
    latest = np.full(len(org_names), -np.inf)
    np.fmax.at(latest, finish_org, finish_time)
    is_latest = finish_time == latest[finish_org]
    latest_finish = np.full(len(org_names), -1, dtype=np.intp)
    latest_finish[finish_org[is_latest]] = np.flatnonzero(is_latest)
    return {
        name: None if finish < 0 else finishes[finish]
        for name, finish in zip(org_names, latest_finish.tolist(), strict=True)
    }
