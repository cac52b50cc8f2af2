"""`plan`: the whole contract, from a scenario to its plan."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, compress
from typing import TypeVar, cast

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
    PlanArrays,
    QueueColumns,
    RunningChart,
    Scenario,
)
from .order import DEFAULT_POLICY, Indices, column, fair_order_indices, org_codes
from .org_replay import org_replay
from .replay import EventReplay
from .waiting import left_out_reasons, reason_names, waiting_reasons

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

    Every step past the replay works on whole numpy columns; lists are made once, for the plan's
    own values (see `_real_plan`).
    """
    queue = _queue(scenario)
    queued_count = len(queue.columns)
    chart_org, org_names = org_codes([*queue.columns.org, *(chart.org for chart in scenario.running)])
    org_of = np.array(chart_org, dtype=np.intp)
    order = fair_order_indices(queue.columns, scenario, org_of[:queued_count], org_names)
    columns = _columns(scenario, queue.columns, order, org_of, org_names)
    starts, etas = _replay(scenario, queue.columns, columns)
    start_time = np.array(starts, dtype=np.float64)  # None (never starts) becomes nan
    bands = _bands(scenario, queue, columns, start_time)
    return _real_plan(scenario, queue, columns, starts, etas, start_time, bands)


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

    `chart_org`: the org code of each queued chart, then of each running chart. `later` and
    `later_at`: the charts of the order available only after now, and when (empty on the lane path,
    which none reaches); `pending` the same as the event replays take them, (available_at, chart)
    with the scenario's own times. `retry`: the retry marks when a retry budget applies to a chart
    of the order, else None. `avg` is in the scenario's time type (see `_time_type`), `avg_time`
    the same as floats.
    """

    order: Indices
    chart_org: Indices
    org_names: list[str]
    org: Indices
    units: NDArray[np.int64]
    avg: list[float]
    avg_time: NDArray[np.float64]
    caps: list[int | None]
    lanes: bool
    later: Indices
    later_at: NDArray[np.float64]
    pending: list[tuple[float, int]]
    retry: NDArray[np.bool_] | None
    running_org: list[int]
    running_finish: list[float]
    running_units: list[int]


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
    scenario: Scenario, queue: QueueColumns, order: Indices, chart_org: Indices, org_names: list[str]
) -> _Columns:
    """Step 3: the columns of the order and of the running charts, and which replay applies."""
    budget, now, running = scenario.budget, scenario.now, scenario.running
    queued_count = len(queue)
    org = chart_org[:queued_count][order]
    units = np.minimum(column(queue.cost, np.int64), budget)[order]
    caps = [scenario.orgs.get(name, DEFAULT_POLICY).max_concurrency for name in org_names]
    running_units = [min(chart.cost, budget) for chart in running]
    available_at = np.array(queue.available_at, dtype=np.float64)  # None (available now) becomes nan
    becomes_available = available_at > now
    lanes = _lanes_apply(scenario, queue, order, units, org, caps, running_units, bool(becomes_available.any()))
    later, later_at, pending = _later_charts(queue.available_at, available_at, becomes_available, order)
    retry = None
    if scenario.retry_budget is not None:
        marked = column(queue.retry, np.bool_)[order]
        retry = marked if marked.any() else None
    avg = column(queue.avg, _time_type(scenario, queue))[order]
    return _Columns(
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
        pending=[] if lanes else pending,
        retry=retry,
        running_org=chart_org[queued_count:].tolist(),
        running_finish=[max(now, chart.started + chart.avg) for chart in running],
        running_units=running_units,
    )


def _later_charts(
    available_at: Sequence[float | None],
    available_time: NDArray[np.float64],
    becomes_available: NDArray[np.bool_],
    order: Indices,
) -> tuple[Indices, NDArray[np.float64], list[tuple[float, int]]]:
    """The charts of the order available only after now: their positions in the order and their
    `available_at` as arrays, and as the (available_at, position) pairs the event replays take,
    each with the scenario's own time (an int stays an int). In queue order; a chart outside the
    order is left out."""
    position = np.full(len(available_at), -1, dtype=np.intp)
    position[order] = np.arange(len(order), dtype=np.intp)
    marked = becomes_available & (position >= 0)
    charts = np.flatnonzero(marked)
    later = position[charts]
    if not len(later):
        return later, available_time[charts], []
    ready_at = cast("list[float]", list(map(available_at.__getitem__, charts.tolist())))  # each has one
    return later, available_time[charts], list(zip(ready_at, later.tolist(), strict=True))


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


def _bands(scenario: Scenario, queue: _Queue, columns: _Columns, start_time: NDArray[np.float64]) -> _Bands | None:
    """Step 6: the p10-p90 bands when a spread or an arrival is known (None: the ETAs themselves)."""
    if not (scenario.spread or scenario.running_spread or queue.arrivals or queue.foreseen is not None):
        return None
    real_count, running = queue.real_count, scenario.running
    queued_spread = spreads(scenario.spread, real_count)
    if queue.expected_spread:
        queued_spread = np.concatenate((queued_spread, queue.expected_spread))
    spread = queued_spread[columns.order]
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
    queue: _Queue,
    columns: _Columns,
    starts: Sequence[float | None],
    etas: Sequence[float | None],
    start_time: NDArray[np.float64],
    bands: _Bands | None,
) -> Plan:
    """Step 7: the plan of the real charts, keyed by chart id; the expected ones only shaped it.

    1. The plan's layout of chart ids: the real charts of the order (all of it without expected
       charts), the real ones left out of it, the running ones; and each one's org (`layout_org`).
    2. Starts, ETAs and bands in that layout: the replay's own values (an int stays an int), None
       where a chart has none; all of them also as float arrays (nan for None), with the layout as
       indices into the queue (`Plan.arrays`).
    3. Clear-times per org: the latest ETA and band edges (`_org_clear`); with spreads the median
       last finish (`forecast.median_last_finish`), never before the latest ETA, which also raises
       the band's upper edge. With expected charts, only orgs with a real chart get a key.
    4. Why each chart waits, on first use (`_waiting`).
    """
    running = scenario.running
    real_count, queued_count = queue.real_count, len(queue.columns)
    org_names, chart_org = columns.org_names, columns.chart_org
    waiting_input = _WaitingInput.of(scenario, queue, columns, start_time)
    order, org, avg, eta_time = columns.order, columns.org, columns.avg_time, np.array(etas, dtype=np.float64)
    if queued_count > real_count:  # the expected charts only shaped the real charts' times
        real = order < real_count
        real_list = real.tolist()
        order, org, avg, eta_time, start_time = order[real], org[real], avg[real], eta_time[real], start_time[real]
        starts, etas = list(compress(starts, real_list)), list(compress(etas, real_list))
        if bands:
            bands = _Bands(bands.low[real], bands.high[real], bands.running_low, bands.running_high,
                           bands.spread[real], bands.running_spread)  # fmt: skip

    left_out = np.ones(real_count, dtype=bool)
    left_out[order] = False
    left_out_charts = np.flatnonzero(left_out)
    chart_id = np.fromiter(iter(queue.columns.id), dtype=object, count=real_count)
    order_ids: list[str] = chart_id[order].tolist()
    chart_ids = ChartIds([*order_ids, *chart_id[left_out_charts].tolist(), *(c.id for c in running)])
    running_org = chart_org[queued_count:]
    layout_org = np.concatenate((org, chart_org[:real_count][left_out_charts], running_org))
    not_planned = [None] * len(left_out_charts)
    nothing = np.full(len(left_out_charts), np.nan)
    running_started = np.array([chart.started for chart in running], dtype=np.float64)

    def layout(
        planned: NDArray[np.float64], values: Sequence[float | None], running_values: Sequence[float | None]
    ) -> tuple[NDArray[np.float64], list[float | None]]:
        """Times of the order's real charts and of the running ones, as laid out in the plan."""
        return (
            np.concatenate((planned, nothing, np.array(running_values, dtype=np.float64))),
            [*values, *not_planned, *running_values],
        )

    eta_time, eta_values = layout(eta_time, etas, columns.running_finish)
    org_clear = org_clear_low = org_clear_high = _org_clear(org_names, layout_org, eta_time, eta_values)
    eta = eta_low = eta_high = ChartTimes(chart_ids, eta_values)
    low_time = high_time = eta_time
    if bands:
        low_time, low_values = layout(bands.low, _times(bands.low), bands.running_low)
        high_time, high_values = layout(bands.high, _times(bands.high), bands.running_high)
        org_clear_low = _org_clear(org_names, layout_org, low_time, low_values)
        org_clear_high = _org_clear(org_names, layout_org, high_time, high_values)
        last = median_last_finish(
            now=scenario.now, org=np.concatenate((org, running_org)),
            start=np.concatenate((start_time, running_started)),
            avg=np.concatenate((avg, np.array([chart.avg for chart in running], dtype=np.float64))),
            spread=np.concatenate((bands.spread, bands.running_spread)), org_count=len(org_names),
        )  # fmt: skip
        org_clear = _median_clear(org_names, last, org_clear)
        org_clear_high = {name: _later(high, org_clear[name]) for name, high in org_clear_high.items()}
        eta_low, eta_high = ChartTimes(chart_ids, low_values), ChartTimes(chart_ids, high_values)
    if queued_count > real_count:  # no key for an org that has only expected charts
        real_orgs = {org_names[code] for code in np.flatnonzero(np.bincount(layout_org, minlength=len(org_names)))}
        org_clear, org_clear_low, org_clear_high = (
            {name: clear for name, clear in clears.items() if name in real_orgs}
            for clears in (org_clear, org_clear_low, org_clear_high)
        )
    clear_times = [clear for clear in org_clear.values() if clear is not None]
    waiting = _Waiting(lambda: _waiting(waiting_input, chart_id, left_out_charts))
    return Plan(
        order=order_ids,
        start=ChartTimes(chart_ids, [*starts, *not_planned, *(chart.started for chart in running)]),
        eta=eta,
        org_clear=org_clear,
        global_clear=max(clear_times) if clear_times else None,
        eta_low=eta_low,
        eta_high=eta_high,
        org_clear_low=org_clear_low,
        org_clear_high=org_clear_high,
        reason=LazyChartValues(chart_ids, lambda: waiting.columns()[0]),
        waiting_until=LazyChartValues(chart_ids, lambda: waiting.columns()[1]),
        head_of_line=LazyChartValues(chart_ids, lambda: waiting.columns()[2]),
        arrays=PlanArrays(
            queued=np.concatenate((order, left_out_charts)),
            start=np.concatenate((start_time, nothing, running_started)),
            eta=eta_time,
            eta_low=low_time,
            eta_high=high_time,
        ),
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


@dataclass(frozen=True, slots=True)
class _WaitingInput:
    """What step 5 reads, kept until it runs: arrays and small lists only, so that a plan held
    unread keeps no list of the queue's size alive but its own (and the cyclic collector, which
    walks every list, has little to walk)."""

    now: float
    budget: int
    retry_budget: int | None
    real_count: int
    start_time: NDArray[np.float64]
    order: Indices
    org: Indices
    units: NDArray[np.int64]
    caps: list[int | None]
    later: Indices
    later_at: NDArray[np.float64]
    retry: NDArray[np.bool_] | None
    queued_org: Indices
    weights: NDArray[np.int64]
    running_finish: list[float]
    running_org: list[int]
    running_units: list[int]
    running_retry: list[bool]

    @classmethod
    def of(cls, scenario: Scenario, queue: _Queue, columns: _Columns, start_time: NDArray[np.float64]) -> _WaitingInput:
        weights = [scenario.orgs.get(name, DEFAULT_POLICY).weight for name in columns.org_names]
        return cls(
            now=scenario.now, budget=scenario.budget, retry_budget=scenario.retry_budget,
            real_count=queue.real_count, start_time=start_time, order=columns.order, org=columns.org,
            units=columns.units, caps=columns.caps, later=columns.later, later_at=columns.later_at,
            retry=columns.retry, queued_org=columns.chart_org[: queue.real_count],
            weights=np.array(weights, dtype=np.int64), running_finish=columns.running_finish,
            running_org=columns.running_org, running_units=columns.running_units,
            running_retry=[chart.retry for chart in scenario.running],
        )  # fmt: skip


def _waiting(
    given: _WaitingInput, chart_id: NDArray[np.object_], left_out: Indices
) -> tuple[list[str | None], list[float | None], list[str | None]]:
    """Step 5: each chart's reason, until and head of line, laid out as the plan's ids (the real
    charts of the order, then the ones left out, then the running ones).

    1. The charts of the order, expected ones included (they shaped the walk), get their verdict
       at `now` (`waiting.waiting_reasons`); then the expected ones are dropped.
    2. A chart left out of the order: `org_held` when its org's weight is 0, else `chart_paused`.
    3. A running chart has none.
    """
    real_count, order = given.real_count, given.order
    waiting = waiting_reasons(
        now=given.now, budget=given.budget, start=given.start_time, org=given.org, units=given.units,
        caps=given.caps, later=given.later, later_at=given.later_at, retry=given.retry,
        retry_budget=given.retry_budget, running_finish=given.running_finish, running_org=given.running_org,
        running_units=given.running_units, running_retry=given.running_retry,
    )  # fmt: skip
    code, until, behind_head = waiting.code, waiting.until, waiting.behind_head
    head = int(order[waiting.head]) if waiting.head >= 0 else real_count
    head_id = chart_id[head] if head < real_count else None  # an expected chart has no id to name
    real = order < real_count
    if not real.all():
        code, until, behind_head = code[real], until[real], behind_head[real]
    head_of_line = np.full(len(code), None, dtype=object)
    head_of_line[behind_head] = head_id
    held = given.weights[given.queued_org[left_out]] == 0
    not_planned = [None] * len(left_out)
    not_running = [None] * len(given.running_finish)
    return (
        [*reason_names(code), *left_out_reasons(held), *not_running],
        [*_times(until), *not_planned, *not_running],
        [*head_of_line.tolist(), *not_planned, *not_running],
    )


def _times(times: NDArray[np.float64]) -> list[float | None]:
    """The times as floats, None for nan."""
    missing = np.isnan(times)
    if not missing.any():
        return times.tolist()  # type: ignore[no-any-return]
    values = times.astype(object)
    values[missing] = None
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
    integers), floats otherwise: the arithmetic is exact either way. (The columns are read last,
    and the check stops at the first float.)"""
    times = chain(
        (scenario.now,),
        (t for chart in scenario.running for t in (chart.started, chart.avg)),
        queue.avg,
        (ready_at for ready_at in queue.available_at if ready_at is not None),
    )
    return np.int64 if all(type(time) is int for time in times) else np.float64


def _lanes_apply(
    scenario: Scenario,
    queue: QueueColumns,
    order: Indices,
    units: NDArray[np.int64],
    org: Indices,
    caps: Sequence[int | None],
    running_units: Sequence[int],
    any_later: bool,
) -> bool:
    """Whether the lane simulation replays the charts of the order, and pays (see `plan`, step 3).
    `any_later`: some queued chart becomes available only after now.

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
    if any_later:
        return False
    return scenario.retry_budget is None or not column(queue.retry, np.bool_)[order].any()


def _org_clear(
    org_names: Sequence[str], finish_org: Indices, finish_time: NDArray[np.float64], finishes: Sequence[float | None]
) -> dict[str, float | None]:
    """The latest finish per org, None for an org without one.

    The maximum is found on floats (`finish_time`, nan for none, which fmax ignores); the value
    reported is the chart's own (`finishes`, aligned with it: an int stays an int).
    """
    latest = np.full(len(org_names), -np.inf)
    np.fmax.at(latest, finish_org, finish_time)
    is_latest = finish_time == latest[finish_org]
    latest_finish = np.full(len(org_names), -1, dtype=np.intp)
    latest_finish[finish_org[is_latest]] = np.flatnonzero(is_latest)
    return {
        name: None if finish < 0 else finishes[finish]
        for name, finish in zip(org_names, latest_finish.tolist(), strict=True)
    }
