"""`plan`: the whole contract, from a scenario to its plan."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import compress
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from .dispatcher import Dispatcher
from .forecast import Forecast, eta_bands, expected_charts, forecast, running_band, spreads
from .lanes import lane_replay
from .model import QUEUED_FIELDS, ChartIds, ChartTimes, History, Plan, QueueColumns, RunningChart, Scenario
from .order import DEFAULT_POLICY, Indices, column, fair_order_indices, org_codes
from .org_replay import later_charts, org_replay
from .replay import EventReplay

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
    """The plan of `scenario`: fair order, starts, ETAs, their bands and clear-times.

    1. The queue, with the charts the scenario's `arrivals` foresee after the real ones.
    2. The fair order of the eligible queued charts (`fair_order_indices`).
    3. Their columns in that order; each chart occupies c = min(cost, budget) units. Running
       charts finish at max(now, started + avg).
    4. Starts and ETAs (start + avg): the lane simulation where no cap, later `available_at` or
       retry budget can touch a chart of the order (and the lanes stay small), else the event
       replay: `org_replay` when no retry budget applies to a chart of the order, `EventReplay` when one does.
    5. The bands (`forecast.eta_bands`) when a spread or an arrival is known.
    6. The plan of the real charts only: times keyed by chart id (the charts of the order first,
       then the ones left out, then the running ones), clear-times per org and overall.
    """
    queue = QueueColumns.of(scenario.queued)
    running = scenario.running
    budget, now = scenario.budget, scenario.now
    real_count = len(queue)
    expected_spread: list[float] = []
    arrivals = list(scenario.arrivals)
    foreseen: Forecast | None = None
    if scenario.history is not None:
        foreseen = forecast(
            scenario.history, now=now, budget=budget, backlog=_backlog(queue, running, now, budget),
            typical_avg=_typical_avg(scenario.history, queue),
        )  # fmt: skip
        arrivals += foreseen.arrivals
    if arrivals:
        expected, expected_spread = expected_charts(arrivals, now=now, queued=real_count)
        queue = _joined(queue, expected)
    queued_count = len(queue)
    chart_org, org_names = org_codes([*queue.org, *(chart.org for chart in running)])
    order = fair_order_indices(queue, scenario, chart_org[:queued_count], org_names)

    org = column(chart_org[:queued_count], np.intp)[order]
    units = np.minimum(column(queue.cost, np.int64), budget)[order]
    avg = column(queue.avg, _time_type(scenario, queue))[order].tolist()
    caps = [scenario.orgs.get(name, DEFAULT_POLICY).max_concurrency for name in org_names]
    running_finish = [max(now, chart.started + chart.avg) for chart in running]
    running_units = [min(chart.cost, budget) for chart in running]

    starts: Sequence[float | None]
    etas: Sequence[float | None]
    if _lanes_apply(scenario, queue, order, units, org, caps, running_units):
        starts, etas = lane_replay(
            now=now,
            budget=budget,
            running_finish=running_finish,
            running_units=running_units,
            units=units.tolist(),
            avg=avg,
        )
    elif scenario.retry_budget is None or not column(queue.retry, np.bool_)[order].any():
        starts, etas = org_replay(
            now=now,
            budget=budget,
            caps=caps,
            org=org.tolist(),
            units=units.tolist(),
            avg=avg,
            pending=later_charts(queue.available_at, order, now),
            running_finish=running_finish,
            running_org=chart_org[queued_count:],
            running_units=running_units,
        )
    else:
        dispatcher = Dispatcher(
            budget=budget,
            caps=caps,
            org=org.tolist(),
            units=units.tolist(),
            available_at=in_order(queue.available_at, order),
            retry=in_order(queue.retry, order),
            retry_budget=scenario.retry_budget,
        )
        starts, etas = EventReplay(
            dispatcher,
            now=now,
            avg=avg,
            org_count=len(org_names),
            running_finish=running_finish,
            running_org=chart_org[queued_count:],
            running_units=running_units,
            running_retry=[chart.retry for chart in running],
        ).run()

    lows: Sequence[float | None] = etas
    highs: Sequence[float | None] = etas
    running_low: Sequence[float | None] = running_finish
    running_high: Sequence[float | None] = running_finish
    if scenario.spread or arrivals or foreseen is not None:
        spread = np.array(spreads(queue.id[:real_count], scenario.spread) + expected_spread)[order]
        running_avg = [chart.avg for chart in running]
        running_spread = spreads([chart.id for chart in running], scenario.spread)
        bands = eta_bands(
            now=now, budget=budget, starts=starts, avg=avg, units=units.tolist(), spread=spread.tolist(),
            expected=(order >= real_count).tolist(), running_avg=running_avg, running_units=running_units,
            running_spread=running_spread, arrivals=arrivals, foreseen=foreseen,
        )  # fmt: skip
        lows, highs = bands.low, bands.high
        running_bands = running_band(
            now=now, started=[chart.started for chart in running], avg=running_avg, spread=running_spread
        )
        running_low, running_high = running_bands.low, running_bands.high

    if queued_count > real_count:  # the expected charts only shaped the real charts' times
        real = (order < real_count).tolist()
        order, org = order[order < real_count], org[order < real_count]
        starts, etas, lows, highs = (list(compress(times, real)) for times in (starts, etas, lows, highs))

    left_out = np.ones(real_count, dtype=bool)
    left_out[order] = False
    order_ids = in_order(queue.id, order)
    ids = [*order_ids, *in_order(queue.id, np.flatnonzero(left_out)), *(c.id for c in running)]
    chart_ids = ChartIds(ids)
    not_planned = [None] * (real_count - len(order))
    finish_org = np.concatenate((org, column(chart_org[queued_count:], np.intp)))
    org_clear = _org_clear(org_names, finish_org, [*etas, *running_finish])
    clear_times = [clear for clear in org_clear.values() if clear is not None]
    eta = ChartTimes(chart_ids, [*etas, *not_planned, *running_finish])
    banded = lows is not etas
    org_clear_low = _org_clear(org_names, finish_org, [*lows, *running_low]) if banded else org_clear
    org_clear_high = _org_clear(org_names, finish_org, [*highs, *running_high]) if banded else org_clear
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
        eta_low=ChartTimes(chart_ids, [*lows, *not_planned, *running_low]) if banded else eta,
        eta_high=ChartTimes(chart_ids, [*highs, *not_planned, *running_high]) if banded else eta,
        org_clear_low=org_clear_low,
        org_clear_high=org_clear_high,
    )


def _backlog(queue: QueueColumns, running: Sequence[RunningChart], now: float, budget: int) -> float:
    """Seconds the pool takes to run what is queued and what is left of what runs, at full budget."""
    work = float(np.dot(np.minimum(column(queue.cost, np.int64), budget), column(queue.avg, np.float64)))
    work += sum(min(c.cost, budget) * max(0.0, c.started + c.avg - now) for c in running)
    return work / budget


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
