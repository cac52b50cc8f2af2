"""Each chart's chance of finishing after its due time (`forecast.late_chance`, `Plan.late_chance`)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import QueuedChart, RunningChart, Scenario, plan
from scheduling.core.forecast import Z90, late_chance
from tests.scheduling.core.support import scenarios, with_dues

EXAMPLES = settings(max_examples=200, deadline=None, database=None)
TIMES = st.floats(-1e6, 1e6, allow_nan=False)
WIDTHS = st.sampled_from([0.0, 0.0]) | st.floats(0, 1e5, allow_nan=False)


def chance(due: float, eta: float, below: float, above: float, now: float = -math.inf) -> float:
    return float(late_chance(now=now, due=np.array([due]), eta=np.array([eta]), low=np.array([eta - below]),
                             high=np.array([eta + above]))[0])  # fmt: skip


@EXAMPLES
@given(due=TIMES, eta=TIMES, below=WIDTHS, above=WIDTHS)
def test_the_chance_is_a_probability(due: float, eta: float, below: float, above: float) -> None:
    assert 0.0 <= chance(due, eta, below, above) <= 1.0


@EXAMPLES
@given(first=TIMES, second=TIMES, eta=TIMES, below=WIDTHS, above=WIDTHS)
def test_a_later_due_time_is_never_riskier(first: float, second: float, eta: float, below: float, above: float) -> None:
    earlier, later = sorted((first, second))
    assert chance(later, eta, below, above) <= chance(earlier, eta, below, above)


@EXAMPLES
@given(eta=TIMES, below=WIDTHS, above=st.floats(1e-3, 1e5))
def test_a_due_time_at_the_eta_is_an_even_chance(eta: float, below: float, above: float) -> None:
    assert chance(eta, eta, below, above) == 0.5


@EXAMPLES
@given(due=TIMES, eta=TIMES)
def test_without_a_band_the_chance_is_a_step(due: float, eta: float) -> None:
    assert chance(due, eta, 0.0, 0.0) == (1.0 if eta > due else 0.0)


def test_the_band_edges_are_the_laws_p10_and_p90() -> None:
    assert math.isclose(chance(90.0, 100.0, 10.0, 30.0), 0.9, rel_tol=1e-12)
    assert math.isclose(chance(130.0, 100.0, 10.0, 30.0), 0.1, rel_tol=1e-12)
    assert math.isclose(chance(100.0 + 30.0 / Z90, 100.0, 10.0, 30.0), 1 - 0.8413447460685429, rel_tol=1e-12)


@EXAMPLES
@given(due=TIMES, eta=TIMES, below=WIDTHS, above=WIDTHS, past=st.floats(1e-3, 1e5))
def test_a_due_time_already_past_is_certain(due: float, eta: float, below: float, above: float, past: float) -> None:
    assert chance(due, max(eta, due + past), below, above, now=due + past) == 1.0


def test_no_due_time_or_no_eta_is_no_chance() -> None:
    nan = math.nan
    result = late_chance(now=0.0, due=np.array([nan, 5.0, nan]), eta=np.array([3.0, nan, nan]), low=np.full(3, nan),
                         high=np.full(3, nan))  # fmt: skip
    assert np.isnan(result).all()


def test_a_plan_gives_every_queued_and_running_chart_a_key() -> None:
    scenario = Scenario(
        now=0,
        budget=1,
        queued=[
            QueuedChart(id="late", org="a", created=0, avg=10, due=5),
            QueuedChart(id="free", org="a", created=1, avg=10),
            QueuedChart(id="paused", org="a", created=2, avg=10, paused=True, due=50),
            QueuedChart(id="early", org="a", created=3, avg=10, due=100),
        ],
        running=[RunningChart(id="run", org="a", started=0, avg=4, due=4)],
    )
    result = plan(scenario)
    # The ETAs: run 4, late 14, free 24, early 34; the paused chart has none.
    assert dict(result.late_chance) == {"late": 1.0, "free": None, "early": 0.0, "paused": None, "run": 0.0}
    assert np.array_equal(result.arrays.late_chance, [1.0, np.nan, 0.0, np.nan, 0.0], equal_nan=True)


def test_with_spreads_a_due_time_before_the_eta_is_more_likely_late_than_not() -> None:
    queued = [QueuedChart(id=f"c{index}", org="a", created=index, avg=10, due=10 * index + 5) for index in range(4)]
    result = plan(Scenario(now=0, budget=1, queued=queued, spread=[0.5] * 4))
    for chart in queued:
        assert 0.5 < result.late_chance[chart.id] < 1.0  # type: ignore[operator]


@EXAMPLES
@given(st.data())
def test_the_plan_reads_the_chance_off_each_chart_band(data: st.DataObject) -> None:
    scenario = data.draw(with_dues(data.draw(scenarios())))
    result = plan(scenario)
    due = {chart.id: chart.due for chart in scenario.queued} | {chart.id: chart.due for chart in scenario.running}
    assert set(result.late_chance) == set(due)
    for chart_id, chart_chance in result.late_chance.items():
        eta, chart_due = result.eta[chart_id], due[chart_id]
        if eta is None or chart_due is None:
            assert chart_chance is None
            continue
        low, high = result.eta_low[chart_id], result.eta_high[chart_id]
        assert low is not None
        assert high is not None
        assert chart_chance is not None
        expected = chance(chart_due, eta, eta - low, high - eta, now=scenario.now)
        assert math.isclose(chart_chance, expected, abs_tol=1e-12)


@EXAMPLES
@given(scenarios())
def test_without_due_times_every_chance_is_none(scenario: Scenario) -> None:
    result = plan(scenario)
    assert set(result.late_chance.values()) <= {None}
    assert np.isnan(result.arrays.late_chance).all()
