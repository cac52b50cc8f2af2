"""The planner's whole-column steps against the straightforward readings they replace."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import Arrival, History, PastSubmission, Plan, QueueColumns, QueuedChart, Scenario, plan
from scheduling.core.forecast import (
    BURST_AHEAD,
    MAX_ARRIVAL_SHARE,
    RATE_DOUBT,
    Z90,
    Forecast,
    _unforeseen_spreads,
    eta_bands,
    spreads,
)
from scheduling.core.model import QUEUED_FIELDS
from scheduling.core.planner import _later_charts

from .support import scenarios

EXAMPLES = settings(max_examples=150, deadline=None, database=None)


def queue_available_at(available_at: list[float | None], *, as_array: bool) -> QueueColumns:
    """A queue of these `available_at` (the other columns plain), given as lists or as arrays."""
    queue = QueueColumns.of([QueuedChart(str(i), "o", 0.0, 1.0, available_at=at) for i, at in enumerate(available_at)])
    if not as_array:
        return queue
    arrays = queue.arrays
    return queue.replace(**{name: getattr(arrays, name) for name in QUEUED_FIELDS if name not in ("id", "org")})


@given(
    st.lists(st.none() | st.sampled_from([0, 1, 2.5, 7]), max_size=30),
    st.randoms(use_true_random=False),
    st.sampled_from([0, 2.5]),
    st.booleans(),
)
@EXAMPLES
def test_the_later_charts_are_those_the_replay_reads_chart_by_chart(
    available_at: list[float | None], rng: random.Random, now: float, as_array: bool
) -> None:
    order = np.array(rng.sample(range(len(available_at)), rng.randint(0, len(available_at))), dtype=np.intp)
    queue = queue_available_at(available_at, as_array=as_array)
    later, later_at, pending = _later_charts(queue, queue.arrays.available_at > now, order)
    if as_array:  # an array holds floats: so do the pairs (as its list would give them)
        available_at = [None if at is None else float(at) for at in available_at]
    place = {chart: position for position, chart in enumerate(order.tolist())}
    expected = [
        (ready_at, place[chart])
        for chart, ready_at in enumerate(available_at)
        if ready_at is not None and ready_at > now and chart in place
    ]
    assert pending == expected
    assert [type(ready_at) for ready_at, _ in pending] == [type(ready_at) for ready_at, _ in expected]
    assert later.tolist() == [chart for _, chart in expected]
    assert later_at.tolist() == [float(ready_at) for ready_at, _ in expected]


@given(st.lists(st.sampled_from([0.0, 0.3, 1.2]), min_size=1, max_size=12))
@EXAMPLES
def test_spreads_are_the_column_or_zero_for_each_chart(column: list[float]) -> None:
    assert spreads(column, len(column)).tolist() == column
    assert spreads([], len(column)).tolist() == [0.0] * len(column)  # none known
    with pytest.raises(ValueError, match="aligned"):  # a column that is not empty must be aligned
        spreads(column, len(column) + 1)


def bands_one_by_one(
    *,
    now: float,
    budget: int,
    starts: list[float | None],
    avg: list[float],
    units: list[int],
    spread: list[float],
    expected: list[bool],
    running_variance: float,
    arrivals: list[Arrival],
    foreseen: Forecast | None,
) -> tuple[list[float], list[float]]:
    """The bands of `forecast.eta_bands` chart by chart: for each chart, the sums over the charts
    started before it (earlier start, or the same start and earlier in the replay)."""
    lows, highs = [], []
    for chart, start in enumerate(starts):
        if start is None:
            lows.append(math.nan)
            highs.append(math.nan)
            continue
        real_before = expected_variance_before = expected_work_before = 0.0
        for other, other_start in enumerate(starts):
            if other_start is None or (other_start, other) >= (start, chart):
                continue
            work = units[other] * avg[other]
            if expected[other]:
                expected_variance_before += work * work * math.exp(spread[other] ** 2)
                expected_work_before += work
            else:
                real_before += work * work * math.expm1(spread[other] ** 2)
        before = real_before + expected_variance_before
        if foreseen is not None and foreseen.evidence > 0:
            before += RATE_DOUBT * expected_work_before**2 / foreseen.evidence
        start_spread = Z90 * math.sqrt(before + running_variance) / budget
        share = sum(a.rate * a.avg * min(a.cost, budget) / budget for a in arrivals if start < a.until)
        start_spread /= 1.0 - min(share, MAX_ARRIVAL_SHARE)
        early = late = start_spread
        if foreseen is not None:
            early_spreads, late_spreads = _unforeseen_spreads(
                np.array([start_spread]), np.array([start - now]), foreseen, budget
            )
            early, late = float(early_spreads[0]), float(late_spreads[0])
        if arrivals:
            none_came = Z90 * math.sqrt(real_before + running_variance) / budget + expected_work_before / budget
            early = min(early, none_came)
        sigma, mean = spread[chart], avg[chart]
        median = mean * math.exp(-(sigma**2) / 2)  # the ETA is start + median
        below, above = median - median * math.exp(-Z90 * sigma), median * math.exp(Z90 * sigma) - median
        lows.append(max(start + median - math.hypot(early, below), now))
        highs.append(start + median + math.hypot(late, above))
    return lows, highs


@given(
    st.lists(
        st.tuples(
            st.none() | st.sampled_from([0.0, 3.0, 5.5, 12.0]),
            st.sampled_from([1.0, 4.0, 30.0]),
            st.integers(1, 3),
            st.sampled_from([0.0, 0.2, 0.8]),
            st.booleans(),
        ),
        max_size=10,
    ),
    st.booleans(),
    st.booleans(),
)
@EXAMPLES
def test_bands_worked_out_in_start_order_are_the_bands_chart_by_chart(
    charts: list[tuple[float | None, float, int, float, bool]], with_arrivals: bool, with_history: bool
) -> None:
    starts, avg, units, spread, expected = (
        (list(column) for column in zip(*charts, strict=True)) if charts else ([],) * 5
    )
    arrivals = [Arrival("b", rate=0.1, until=6.0, avg=2.0), Arrival("c", rate=0.05, until=20.0, avg=3.0, cost=2)]
    given_arrivals = arrivals if with_arrivals else []
    foreseen = Forecast([], evidence=4.0, burst_rate=0.01, burst_work=50.0, newcomer_load=0.1) if with_history else None
    running = {"running_avg": [10.0, 2.0], "running_units": [1, 2], "running_spread": [0.5, 0.0]}
    running_variance = (1 * 10.0) ** 2 * math.expm1(0.25)
    bands = eta_bands(
        now=1.0, budget=3, starts=starts, avg=avg, units=units, spread=spread, expected=expected,
        arrivals=given_arrivals, foreseen=foreseen, **running,  # type: ignore[arg-type]
    )  # fmt: skip
    lows, highs = bands_one_by_one(
        now=1.0, budget=3, starts=starts, avg=avg, units=units, spread=spread, expected=expected,
        running_variance=running_variance, arrivals=given_arrivals, foreseen=foreseen,
    )  # fmt: skip
    assert bands.low.tolist() == pytest.approx(lows, rel=1e-12, abs=1e-9, nan_ok=True)
    assert bands.high.tolist() == pytest.approx(highs, rel=1e-12, abs=1e-9, nan_ok=True)


def latest(times: list[float | None]) -> float | None:
    known = [time for time in times if time is not None]
    return max(known) if known else None


@given(scenarios(), st.booleans())
@EXAMPLES
def test_org_clear_times_are_the_latest_of_their_charts(scenario: Scenario, with_history: bool) -> None:
    """Each org's clear-time band is the latest of its charts' bands (None if none has one); with
    spreads the clear-time itself is at least its latest ETA. Orgs that only expected charts bring
    get no key."""
    ids = [chart.id for chart in scenario.queued] + [chart.id for chart in scenario.running]
    spread = [0.1 * (index % 3) for index in range(len(ids))]  # queued then running, as `ids`
    history = History([PastSubmission("newcomer", created=scenario.now - 5, avg=3.0, count=4)], since=scenario.now - 60)
    queued = len(scenario.queued)
    banded = dataclasses.replace(
        scenario, spread=spread[:queued], running_spread=spread[queued:], history=history if with_history else None
    )
    for case in (scenario, banded):
        result = plan(case)
        org_of = {chart.id: chart.org for chart in [*case.queued, *case.running]}
        assert set(result.org_clear) == set(org_of.values())
        for org in result.org_clear:
            charts = [chart_id for chart_id in ids if org_of[chart_id] == org]
            assert result.org_clear_low[org] == latest([result.eta_low[c] for c in charts])
            eta = latest([result.eta[c] for c in charts])
            if case is scenario:
                assert result.org_clear[org] == result.org_clear_high[org] == eta
            elif eta is not None:
                clear = result.org_clear[org]
                high = latest([result.eta_high[c] for c in charts])
                assert clear is not None
                assert high is not None
                assert clear >= eta
                assert result.org_clear_high[org] >= max(high, clear)  # the last finish's p90, if later


PLAN_MAPPINGS = ("start", "eta", "eta_low", "eta_high", "reason", "waiting_until", "head_of_line")
ARRAY_FIELDS = tuple(name for name in QUEUED_FIELDS if name not in ("id", "org"))


def plan_fields(result: Plan) -> str:
    """Every field of a plan written out with its types (1 and 1.0 differ), in its order."""
    return repr(
        [
            list(result.order),
            *(list(getattr(result, name).items()) for name in PLAN_MAPPINGS),
            *(list(clears.items()) for clears in (result.org_clear, result.org_clear_low, result.org_clear_high)),
            result.global_clear,
        ]
    )


def with_float_times(charts: Sequence[QueuedChart]) -> list[QueuedChart]:
    """The charts with their times as floats, as an array of them holds them."""
    return [
        dataclasses.replace(
            chart,
            created=float(chart.created),
            avg=float(chart.avg),
            available_at=None if chart.available_at is None else float(chart.available_at),
        )
        for chart in charts
    ]


@given(scenarios(), st.booleans(), st.booleans())
@EXAMPLES
def test_a_queue_given_as_arrays_plans_as_the_same_queue_given_as_lists(
    scenario: Scenario, with_history: bool, with_spread: bool
) -> None:
    """A snapshot gives the queue's numeric columns as arrays, the plan command as lists: the plan
    is the same, field by field. (The queue's times as floats: an array holds floats, and so does
    the list it stands for.)"""
    queued = with_float_times(scenario.queued)
    spread = [0.1 * (index % 3) for index in range(len(queued))] if with_spread else []
    history = History([PastSubmission("a", created=scenario.now - 5, avg=3.0, count=4)], since=scenario.now - 60)
    as_lists = dataclasses.replace(scenario, queued=queued, spread=spread, history=history if with_history else None)
    columns = QueueColumns.of(queued)
    as_arrays = dataclasses.replace(
        as_lists,
        queued=columns.replace(**{name: getattr(columns.arrays, name) for name in ARRAY_FIELDS}),
        spread=np.array(spread, dtype=np.float64),
    )
    assert plan_fields(plan(as_arrays)) == plan_fields(plan(as_lists))


@given(scenarios(), st.booleans())
@EXAMPLES
def test_the_plan_s_ids_and_clear_times_are_those_of_its_listed_values(scenario: Scenario, with_history: bool) -> None:
    """The plan lists its ids and times on first read, and finds the clear-times on arrays: the
    order is the first of its ids, and each org's clear-time (no spreads) is the latest of its
    charts' ETAs as the plan lists them, one of those very values (an int stays an int)."""
    history = History([PastSubmission("newcomer", created=scenario.now - 5, avg=3.0, count=4)], since=scenario.now - 60)
    result = plan(dataclasses.replace(scenario, history=history if with_history else None))
    ids = list(result.eta)
    assert list(result.order) == ids[: len(result.order)]
    assert ids == list(result.start) == list(result.eta_high) == list(result.reason)
    assert len(result.eta) == len(ids) == len(scenario.running) + len({chart.id for chart in scenario.queued})
    org_of = {chart.id: chart.org for chart in scenario.queued} | {chart.id: chart.org for chart in scenario.running}
    for org, clear in result.org_clear.items():
        etas = [eta for chart_id in ids if org_of[chart_id] == org and (eta := result.eta[chart_id]) is not None]
        assert clear == max(etas, default=None)
        assert type(clear) in {type(eta) for eta in etas if eta == clear} | ({type(None)} if not etas else set())


@given(scenarios())
@EXAMPLES
def test_queue_columns_read_as_arrays_and_back_are_the_same_charts(scenario: Scenario) -> None:
    """A queue's arrays, given back as the columns of a queue, read as the same charts, types and
    None for no `available_at` included (the times as floats, as an array holds them)."""
    queued = with_float_times(scenario.queued)
    columns = QueueColumns.of(queued)
    from_arrays = columns.replace(**{name: getattr(columns.arrays, name) for name in ARRAY_FIELDS})
    assert repr(list(from_arrays)) == repr(queued)
    assert from_arrays == columns
    for name in ARRAY_FIELDS:
        assert repr(getattr(from_arrays.arrays, name).tolist()) == repr(getattr(columns.arrays, name).tolist())


def unforeseen_spreads_in_full(
    start_spread: np.ndarray, wait: np.ndarray, foreseen: Forecast, budget: int
) -> tuple[np.ndarray, np.ndarray]:
    """`forecast._unforeseen_spreads` with every term worked out, 0 or not."""
    wait = np.maximum(np.nan_to_num(wait, nan=0.0), 0.0)
    burst = np.minimum(foreseen.burst_work, wait * budget / 2)
    expected_bursts = foreseen.burst_rate * wait
    burst_delay = BURST_AHEAD * (expected_bursts + Z90 * np.sqrt(expected_bursts)) * burst / budget
    newcomer_shift = wait * foreseen.newcomer_load
    return start_spread + newcomer_shift, np.sqrt(start_spread**2 + burst_delay**2 + newcomer_shift**2)


@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 1e-160, 0.3, 7.5, 1e200]), st.sampled_from([0.0, 2.0, 600.0])), max_size=8
    ),
    st.sampled_from([0.0, 0.002]),
    st.sampled_from([0.0, 50.0]),
    st.sampled_from([0.0, 0.05]),
)
@EXAMPLES
def test_unforeseen_spreads_leave_out_only_terms_that_are_zero(
    charts: list[tuple[float, float]], burst_rate: float, burst_work: float, newcomer_load: float
) -> None:
    start_spread = np.array([spread for spread, _ in charts], dtype=np.float64)
    wait = np.array([wait for _, wait in charts], dtype=np.float64)
    foreseen = Forecast(arrivals=[], evidence=1.0, burst_rate=burst_rate, burst_work=burst_work,
                        newcomer_load=newcomer_load)  # fmt: skip
    with np.errstate(over="ignore"):  # 1e200 squared is inf on purpose: the two must agree there too
        early, late = _unforeseen_spreads(start_spread, wait, foreseen, 4)
        full_early, full_late = unforeseen_spreads_in_full(start_spread, wait, foreseen, 4)
    assert early.tobytes() == full_early.tobytes()
    assert late.tobytes() == full_late.tobytes()


@given(scenarios(), st.booleans())
@EXAMPLES
def test_the_plan_s_arrays_are_its_own_values_and_layout(scenario: Scenario, with_history: bool) -> None:
    """`Plan.arrays` (what the replan writes from) holds the plan's starts, ETAs and bands, bit for
    bit as floats (NaN for None), and the layout of its chart ids: the charts of the order first,
    in order, each named by its index into the queue, then the running charts."""
    queued = len(scenario.queued)
    spread = [0.1 * (index % 3) for index in range(queued + len(scenario.running))]
    history = History([PastSubmission("newcomer", created=scenario.now - 5, avg=3.0, count=4)], since=scenario.now - 60)
    banded = dataclasses.replace(
        scenario, spread=spread[:queued], running_spread=spread[queued:], history=history if with_history else None
    )
    for case in (scenario, banded):
        result = plan(case)
        arrays = result.arrays
        ids = list(result.start)
        assert [case.queued[index].id for index in arrays.queued.tolist()] + [c.id for c in case.running] == ids
        assert ids[: len(result.order)] == result.order
        for values, times in (
            (arrays.start, result.start),
            (arrays.eta, result.eta),
            (arrays.eta_low, result.eta_low),
            (arrays.eta_high, result.eta_high),
        ):
            expected = np.array([math.nan if time is None else float(time) for time in times.values()])
            assert values.dtype == np.float64
            assert values.tobytes() == expected.tobytes()
