"""The open-arrival simulator: its workloads, its schedule over the core and the shell's rules, and
the scores of the predictors on the same charts."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from tools.loadtest import simulate
from tools.loadtest.simulate import (
    KINDS,
    SimChart,
    Workload,
)


def _load(workload: Workload, seconds: float) -> float:
    work = sum(chart.duration * min(chart.kind.cost, workload.budget) for chart in workload.charts)
    return work / (workload.budget * seconds)


def test_the_steady_workload_is_poisson_at_load_095() -> None:
    workload = simulate.steady()
    assert 0.85 <= _load(workload, 6000) <= 1.05
    gaps = [b.arrival - a.arrival for a, b in zip(workload.charts, workload.charts[1:], strict=False)]
    assert max(Counter(gaps).values()) < 5  # no bulk: arrivals one at a time


def test_the_bursty_workload_adds_bulk_uploads_of_50_to_300_from_one_org() -> None:
    workload = simulate.bursty()
    assert 0.9 <= _load(workload, 8000) <= 1.2
    bulks = Counter((chart.arrival, chart.org) for chart in workload.charts)
    sizes = [size for size in bulks.values() if size > 1]
    assert len(sizes) >= 4
    assert all(50 <= size <= 300 for size in sizes)
    assert len({(arrival, org) for arrival, org in bulks}) == len({arrival for arrival, _ in bulks})


def test_the_cold_start_is_one_backfill_then_ten_small_orgs_from_the_first_minute() -> None:
    workload = simulate.cold_start()
    at_zero = [chart for chart in workload.charts if chart.arrival == 0]
    assert len(at_zero) == 300
    assert {chart.org for chart in at_zero} == {"backfill"}
    small = {chart.org for chart in workload.charts} - {"backfill"}
    assert len(small) == 10
    assert min(chart.arrival for chart in workload.charts if chart.org in small) >= 60


def test_the_schedule_runs_every_chart_once_within_the_budget() -> None:
    workload = simulate.cold_start()
    schedule = simulate.simulate(workload, policy="deficit", sample_every=120, enqueue_every=10)
    assert set(schedule.start) == set(schedule.finish) == {chart.id for chart in workload.charts}
    edges = []
    for chart in workload.charts:
        assert schedule.start[chart.id] >= chart.arrival
        units = min(chart.kind.cost, workload.budget)
        edges += [(schedule.finish[chart.id], -units), (schedule.start[chart.id], units)]
    held = 0
    for _, units in sorted(edges):  # finishes first at a tie
        held += units
        assert held <= workload.budget


def test_fair_share_holds_between_two_backlogged_orgs() -> None:
    # Two orgs each submit 40 identical charts at 0, weights 2 and 1: while both wait, starts go 2:1.
    charts = [SimChart(f"{org}{i:02d}", org, KINDS[1], 0.0, 60.0) for org in ("a", "b") for i in range(40)]
    workload = Workload("two", budget=3, weights={"a": 2, "b": 1}, charts=charts)
    schedule = simulate.simulate(workload, policy="round_robin", sample_every=600, enqueue_every=80)
    first = sorted(schedule.start, key=lambda chart_id: (schedule.start[chart_id], chart_id))[:30]
    assert Counter(chart_id[0] for chart_id in first) == {"a": 20, "b": 10}


@pytest.fixture(scope="module")
def cold_start_scores() -> dict[str, simulate.Scores]:
    (result,) = simulate.run(["cold_start"], ["round_robin"], scale=0.5)
    return result.scores


def test_the_floor_beats_the_naive_predictors(cold_start_scores: dict[str, simulate.Scores]) -> None:
    floor = cold_start_scores["floor: told every arrival"]
    for name in ("naive: pending x avg / capacity", "queue depth ahead / drain rate", "fairsched"):
        assert floor.sampled.median < cold_start_scores[name].sampled.median  # type: ignore[operator]
    assert floor.band_sampled is None  # only fairsched's predictors give bands


def test_fairsched_is_scored_on_every_figure(cold_start_scores: dict[str, simulate.Scores]) -> None:
    ours = cold_start_scores["fairsched"]
    for errors in (
        ours.enqueue,
        ours.enqueue_deep,
        ours.sampled,
        ours.sampled_deep,
        ours.sampled_shallow,
        ours.org_clear,
    ):
        assert errors.count > 0
    assert ours.band_enqueue is not None
    assert ours.band_sampled is not None
    assert ours.width_sampled is not None
    # The cold start's newcomers widen the band: it holds most finishes even before history exists.
    assert ours.band_enqueue >= 0.7
    before = cold_start_scores["fairsched, one window (before)"]
    assert before.band_enqueue is not None
    assert ours.band_enqueue > before.band_enqueue


def test_the_table_has_a_row_per_predictor_and_the_targets_are_judged() -> None:
    (result,) = simulate.run(["cold_start"], ["deficit"], scale=0.25)
    rows = simulate.table_rows([result])
    assert [row[2] for row in rows] == list(simulate.PREDICTORS)
    assert all(len(row) == len(simulate.TABLE_HEADER) for row in rows)
    judged = simulate.targets([result])
    assert {target.target for target in judged} >= {"sampled median <= 1.5x floor", "band coverage sampled 70-90%"}
    assert all(target.workload == "cold_start" for target in judged)


def test_the_org_clear_target_shows_the_floor_it_is_measured_against() -> None:
    (result,) = simulate.run(["cold_start"], ["deficit"], scale=0.25)
    steady = dataclasses.replace(result, workload="steady")  # the clear-time target is judged there
    (clear,) = [target for target in simulate.targets([steady]) if target.target.startswith("org clear-time")]
    ours, floor = (result.scores[name].org_clear.median for name in ("fairsched", "floor: told every arrival"))
    assert clear.measured == f"{ours:.0%} (floor {floor:.0%})"
