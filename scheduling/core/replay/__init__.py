"""The replays: the start and ETA of every chart of the fair order, behind one seam (`replay`).

Every replay plays the dispatcher forward from `now`: at each decision instant (`now`, a finish, an
`available_at`) the walk decides the charts not yet started, in order, by the one dispatch rule
(`dispatcher.Dispatcher.decide`). The reference, `reference.EventReplay`, is that walk for any
scenario; `lanes.lane_replay` (its closed form without caps, later charts or retry budget) and
`compiled.compiled_replay` (compiled, without a retry budget) give its starts and ETAs exactly (the
parity matrix, `tests/scheduling/core/test_replay_parity.py`); the figures that keep them are in
`bench/bench_core.py`'s header.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from ..dispatcher import Dispatcher
from ..model import times_list
from ..order import Indices
from .lanes import lane_replay
from .reference import EventReplay

# The lanes hold one entry per budget unit (seeded from one per unit held by a running chart), and a
# chart of c units moves c of them: past these sizes the event replay, whose work grows with neither,
# is the faster of the two.
LANE_UNITS_LIMIT: Final = 4096
LANE_MEAN_UNITS_LIMIT: Final = 4
# The compiled replay takes an order of this many charts once it is loaded in the process
# (`load_compiled_replay`; the Celery worker loads it as it starts). Below it the pure replays, its
# reference, serve the small plans (tests, contract scenarios) in every process.
COMPILED_MIN_CHARTS: Final = 10_000
# A plan that would load it first (import numba, load the kernel from its cache, once per process)
# takes it from these sizes, where the load is won back at once (`bench/bench_core.py`'s header).
COMPILED_MIN_CHARTS_COLD: Final = 200_000
COMPILED_MIN_CHARTS_COLD_LANES: Final = 3_000_000

Times = Sequence[float | None]
CompiledReplay = Callable[..., tuple[NDArray[np.float64], NDArray[np.float64]]]


@dataclass(frozen=True, slots=True)
class ReplayInput:
    """What a replay reads: the charts of the order (numbered 0..n-1 in it) and the running charts.

    Chart i belongs to org `org[i]` (a code; `caps[o]` is org o's `max_concurrency`), occupies
    `units[i]` = min(cost, budget) and lasts `avg[i]` (in the scenario's time type; `avg_time` the
    same as floats). `later`/`later_at`: the charts available only after `now`, and when, as arrays;
    `pending` the same as (available_at, chart) pairs with the scenario's own times. `retry`: the
    retry marks when `retry_budget` applies to a chart of the order, else None. `lanes`: the lane
    simulation applies (`lanes_apply`).
    """

    now: float
    budget: int
    caps: list[int | None]
    org: Indices
    units: NDArray[np.int64]
    avg: list[float]
    avg_time: NDArray[np.float64]
    later: Indices
    later_at: NDArray[np.float64]
    pending: list[tuple[float, int]]
    retry: NDArray[np.bool_] | None
    retry_budget: int | None
    lanes: bool
    running_finish: list[float]
    running_org: list[int]
    running_units: list[int]
    running_retry: list[bool]


def replay(given: ReplayInput) -> tuple[Times, Times]:
    """The start and ETA of each chart of the order (None: it never starts), by the fastest replay
    that applies; all give the same times.

    1. No retry budget applies, every time is a float and the order is large (`_compiled_replay`):
       the compiled replay.
    2. The lanes apply: the lane simulation.
    3. Otherwise the reference, `EventReplay`.
    """
    if (
        given.retry is None
        and _float_times(given)
        and (compiled_replay := _compiled_replay(len(given.org), lanes=given.lanes)) is not None
    ):
        return compiled_run(compiled_replay, given)
    if given.lanes:
        return lanes_run(given)
    return reference_replay(given)


def compiled_run(kernel: Callable[..., tuple[Any, Any]], given: ReplayInput) -> tuple[Times, Times]:
    """`given` through a compiled replay kernel (the one `_compiled_replay` loads, or the module's)."""
    starts, etas = kernel(
        now=given.now,
        budget=given.budget,
        caps=given.caps,
        org=given.org,
        units=given.units,
        avg=given.avg_time,
        later=given.later,
        later_at=given.later_at,
        running_finish=given.running_finish,
        running_org=given.running_org,
        running_units=given.running_units,
    )
    return times_list(starts), times_list(etas)


def lanes_run(given: ReplayInput) -> tuple[Times, Times]:
    """`given` through the lane simulation (only where `given.lanes`)."""
    return lane_replay(
        now=given.now,
        budget=given.budget,
        running_finish=given.running_finish,
        running_units=given.running_units,
        units=given.units.tolist(),
        avg=given.avg,
    )


def reference_replay(given: ReplayInput) -> tuple[Times, Times]:
    """The start and ETA of each chart of the order by the reference, `EventReplay`."""
    return EventReplay(
        dispatcher_of(given, given.pending),
        now=given.now,
        avg=given.avg,
        org_count=len(given.caps),
        running_finish=given.running_finish,
        running_org=given.running_org,
        running_units=given.running_units,
        running_retry=given.running_retry,
    ).run()


def dispatcher_of(given: ReplayInput, later: Iterable[tuple[float, int]]) -> Dispatcher:
    """The `Dispatcher` of the charts of the order, none started and no running chart counted yet;
    `later`: the (available_at, chart) of each chart available only after `now`. Without a retry
    mark (`given.retry` None) it keeps no retry budget, so no chart counts as a retry."""
    count = len(given.org)
    available_at: list[float | None] = [None] * count
    for ready_at, chart in later:
        available_at[chart] = ready_at
    return Dispatcher(
        budget=given.budget,
        caps=given.caps,
        org=given.org.tolist(),
        units=given.units.tolist(),
        available_at=available_at,
        retry=[False] * count if given.retry is None else given.retry.tolist(),
        retry_budget=None if given.retry is None else given.retry_budget,
    )


def lanes_apply(
    *,
    budget: int,
    units: NDArray[np.int64],
    org: Indices,
    caps: Sequence[int | None],
    running_units: Sequence[int],
    any_later: bool,
    retry: NDArray[np.bool_] | None,
) -> bool:
    """Whether the lane simulation replays the charts of the order, and pays. `any_later`: some
    queued chart becomes available only after now; `retry`: the retry marks of the charts of the
    order when a retry budget applies, else None.

    1. The lanes stay small: the budget and the units held by running charts, and the mean
       units of a chart.
    2. No org of a chart of the order has a cap; no queued chart becomes available later; no
       chart of the order is a retry under a retry budget.
    """
    capped_org = np.array([cap is not None for cap in caps], dtype=bool)
    return (
        max(budget, sum(running_units)) <= LANE_UNITS_LIMIT
        and units.sum() <= LANE_MEAN_UNITS_LIMIT * len(units)
        and not capped_org[org].any()
        and not any_later
        and (retry is None or not retry.any())
    )


def _float_times(given: ReplayInput) -> bool:
    """Whether every time the replay starts a chart at is a float (`now`, the running charts'
    finishes, the later charts' `available_at`), as the compiled replay gives them: with an integer
    among them the pure replays keep it an integer."""
    return (
        type(given.now) is float
        and all(type(finish) is float for finish in given.running_finish)
        and all(type(ready_at) is float for ready_at, _ in given.pending)
    )


def _compiled_replay(chart_count: int, *, lanes: bool) -> CompiledReplay | None:
    """The compiled replay if it pays for `chart_count` charts (see `COMPILED_MIN_CHARTS`; `lanes`:
    the lane simulation would replay them), else None; None too when `FAIRSCHED_COMPILED_CORE` is 0
    or numba is not installed."""
    if chart_count < COMPILED_MIN_CHARTS or not _compiled_core_on():
        return None
    cold_min = COMPILED_MIN_CHARTS_COLD_LANES if lanes else COMPILED_MIN_CHARTS_COLD
    if chart_count < cold_min and not _imported_compiled_replay.cache_info().currsize:
        return None
    return _imported_compiled_replay()


def _compiled_core_on() -> bool:
    """Whether the environment lets the core take its compiled replay (`FAIRSCHED_COMPILED_CORE`, on
    unless 0). The core reads this one setting itself: it also runs without Django (the plan command)."""
    return os.environ.get("FAIRSCHED_COMPILED_CORE", "1") != "0"


@functools.cache
def _imported_compiled_replay() -> CompiledReplay | None:
    """`compiled.compiled_replay`, imported on first use and not with the core (numba's import is
    costly for a small plan); None when numba is not installed."""
    try:
        from .compiled import compiled_replay
    except ImportError:
        return None
    return compiled_replay


def load_compiled_replay() -> bool:
    """Load the compiled replay into this process now, by replaying one chart: from numba's cache, or
    compiled when the cache is missing or stale. For a process that plans large queues, before its
    first plan; a process forked after it inherits the kernel. Whether it is available (numba
    installed, `FAIRSCHED_COMPILED_CORE` not 0)."""
    if not _compiled_core_on() or (compiled_replay := _imported_compiled_replay()) is None:
        return False
    compiled_replay(
        now=0.0,
        budget=1,
        caps=[None],
        org=np.zeros(1, dtype=np.intp),
        units=np.ones(1, dtype=np.int64),
        avg=np.ones(1),
        later=np.zeros(0, dtype=np.intp),
        later_at=np.zeros(0),
        running_finish=[],
        running_org=[],
        running_units=[],
    )
    return True
