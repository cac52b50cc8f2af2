"""Reading the queue by whole columns gives what reading it chart by chart gives, or leaves it to that."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core import ScenarioError, parse_scenario
from scheduling.core.io import _queue_by_chart, _queue_by_columns
from scheduling.core.model import QUEUED_FIELDS, QueueColumns

EDGE_VALUES: st.SearchStrategy[object] = st.sampled_from(
    [None, True, False, 0, -0.0, 1, -1, 0.5, -2.5, 2**53, -(2**53), 2**53 + 1, 2.0**53, 2**70, 10**400,
     float("nan"), float("inf"), "", "x", [], {}]
)  # fmt: skip
GOOD_VALUES = {
    "id": st.text(max_size=3),
    "org": st.sampled_from(["a", "b"]),
    "created": st.integers(-(10**6), 10**6) | st.floats(-1e6, 1e6),
    "avg": st.integers(1, 10**4) | st.floats(0.001, 1e4),
    "cost": st.integers(1, 5),
    "priority": st.integers(-3, 3),
    "high_priority": st.booleans(),
    "paused": st.booleans(),
    "retry": st.booleans(),
    "available_at": st.none() | st.integers(0, 10**6) | st.floats(0, 1e6),
    "spread": st.none() | st.floats(0, 2),
}
REQUIRED = {"id", "org", "created", "avg"}


@st.composite
def queued_charts(draw: st.DrawFn) -> list[Any]:
    """A few charts, nearly all of their values good; now and then one missing, odd or bad."""
    charts: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 30)) == 0:
            charts.append(draw(EDGE_VALUES))
            continue
        chart: dict[str, Any] = {}
        for field, good in GOOD_VALUES.items():
            roll = draw(st.integers(0, 40))
            if roll == 0:
                chart[field] = draw(EDGE_VALUES)
            elif roll < 30 or field in REQUIRED:
                chart[field] = draw(good)
        charts.append(chart)
    return charts


def columns_of(queue: QueueColumns) -> str:
    """The columns written out with their types (1, 1.0 and True differ)."""
    return repr([getattr(queue, name) for name in QUEUED_FIELDS])


@settings(max_examples=500, deadline=None, database=None)
@given(queued_charts())
def test_the_columns_are_those_read_chart_by_chart_or_left_to_that_reading(charts: list[Any]) -> None:
    by_columns_spread: dict[str, float] = {}
    by_columns = _queue_by_columns(charts, by_columns_spread)
    by_chart_spread: dict[str, float] = {}
    try:
        by_chart = _queue_by_chart(charts, by_chart_spread)
    except ScenarioError:
        assert by_columns is None  # what breaks the contract is left to the reading that names it
        assert by_columns_spread == {}
        return
    if by_columns is not None:
        assert columns_of(by_columns) == columns_of(by_chart)
        assert repr(by_columns_spread) == repr(by_chart_spread)


def test_plainly_good_charts_are_read_by_columns() -> None:
    charts = [
        {"id": "a1", "org": "acme", "created": 1, "avg": 30.5, "spread": 0.2, "available_at": 5},
        {"id": "b1", "org": "beta", "created": 2.5, "avg": 20, "cost": 2, "priority": -1, "paused": True},
    ]
    spread: dict[str, float] = {}
    queue = _queue_by_columns(charts, spread)
    assert queue is not None
    assert columns_of(queue) == repr(
        [["a1", "b1"], ["acme", "beta"], [1, 2.5], [30.5, 20], [1, 2], [False, False], [False, True], [0, -1],
         [5, None], [False, False], [None, None]]
    )  # fmt: skip
    assert spread == {"a1": 0.2}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), 'queued[1] (id "b1"): avg must be a number > 0, got NaN'),
        (0, 'queued[1] (id "b1"): avg must be a number > 0, got 0'),
        (2**60, f'queued[1] (id "b1"): avg must be a number > 0 within +-{2**53}, got {2**60}'),
        (True, 'queued[1] (id "b1"): avg must be a number > 0, got true'),
    ],
)
def test_a_bad_value_among_many_good_charts_is_named(value: object, message: str) -> None:
    queued: list[dict[str, Any]] = [{"id": f"c{i}", "org": "acme", "created": i, "avg": 30} for i in range(1000)]
    queued[1] = {"id": "b1", "org": "acme", "created": 1, "avg": value}
    with pytest.raises(ScenarioError) as error:
        parse_scenario({"budget": 2, "queued": queued})
    assert str(error.value) == message


def test_a_float_beyond_two_to_the_53_is_still_accepted() -> None:
    queued = [{"id": "a1", "org": "acme", "created": 2.0**60, "avg": 30}]
    assert _queue_by_columns(queued, {}) is None
    assert [chart.created for chart in parse_scenario({"budget": 2, "queued": queued}).queued] == [2.0**60]
