"""The information limit of "will miss" at half the wait (`tools.loadtest.miss_limit`)."""

from __future__ import annotations

import math
import random

import pytest

from tools.loadtest import miss_limit, simulate
from tools.loadtest.miss_limit import Chance
from tools.loadtest.simulate import KINDS, SimChart, Workload


def _small_steady() -> tuple[Workload, float, int]:
    workload = simulate.steady(seconds=900.0, budget=6)
    return simulate.promised(workload, sample_every=70.0, enqueue_every=4), 70.0, 4


@pytest.mark.parametrize("policy", simulate.POLICIES)
def test_the_loop_is_the_simulators_and_keeps_each_half_wait_state(policy: simulate.Policy) -> None:
    workload, sample_every, enqueue_every = _small_steady()
    schedule = simulate.scored_schedule(workload, policy=policy, sample_every=sample_every, enqueue_every=enqueue_every)
    loop = miss_limit._Loop(workload, policy, sample_every)
    start: dict[str, float] = {}
    actual = {chart.id: chart.duration for chart in workload.charts}
    kept, _ = loop.run(loop.initial(), actual, keep=list(schedule.halfway.values()), start=start)
    assert start == schedule.start
    assert len(schedule.halfway) > 10
    assert any(at != chart.arrival for chart in workload.charts if (at := schedule.halfway.get(chart.id)) is not None)
    for chart_id, at in schedule.halfway.items():
        # Run on from a kept state with the same durations, the chart starts as it did.
        state = kept[at].copy()
        assert chart_id in state.waiting
        _, began = loop.run(state, actual, stop=chart_id)
        assert began == schedule.start[chart_id]


def test_a_chart_that_starts_at_once_has_its_own_durations_tail_as_its_chance() -> None:
    chart = SimChart("a", "x", KINDS[1], 0.0, 50.0, due=70.0)
    workload = Workload("one", budget=1, weights={"x": 1}, charts=[chart])
    schedule = simulate.scored_schedule(workload, policy="round_robin", sample_every=600.0, enqueue_every=1)
    (chance,) = miss_limit.true_chances(workload, schedule, sample_every=600.0, draws=3)
    sigma = KINDS[1].sigma
    z = (math.log(70.0 / 60.0) + sigma**2 / 2) / sigma
    assert (chance.chart, chance.missed) == ("a", False)
    assert chance.chance == pytest.approx(1 - 0.5 * math.erfc(-z / math.sqrt(2)))
    assert chance.given_start == pytest.approx(chance.chance)  # it starts at once: nothing else is unknown


def test_a_chart_behind_a_run_misses_by_the_runs_draws_as_well() -> None:
    # b waits for a (budget 1): due 80 s after arrival, it misses unless both runs are short.
    a = SimChart("a", "x", KINDS[0], 0.0, 30.0, due=1000.0)
    b = SimChart("b", "x", KINDS[0], 0.0, 30.0, due=80.0)
    workload = Workload("two", budget=1, weights={"x": 1}, charts=[a, b])
    schedule = simulate.scored_schedule(workload, policy="round_robin", sample_every=600.0, enqueue_every=1)
    assert schedule.halfway["b"] == 15.0  # a runs 0-30, b waits 0-30
    chances = {c.chart: c.chance for c in miss_limit.true_chances(workload, schedule, sample_every=600.0, draws=4000)}
    # P(A + B > 80 | A > 15), A and B lognormal of mean 30 and log-sigma 0.5, by direct draws.
    rng = random.Random(1)
    kept = [x for x in (miss_limit.draw_duration(rng, a) for _ in range(40000)) if x > 15.0]
    direct = sum(miss_limit.tail(b, 80.0 - x) for x in kept) / len(kept)
    assert chances["b"] == pytest.approx(direct, abs=0.01)
    assert 0.02 < chances["b"] < 0.2


def test_a_duration_drawn_given_how_long_it_has_run_is_never_shorter() -> None:
    rng = random.Random(2)
    chart = SimChart("a", "x", KINDS[2], 0.0, 100.0)
    draws = [miss_limit.draw_duration(rng, chart, 200.0) for _ in range(2000)]
    assert min(draws) >= 200.0
    # Its law given D > 200: half of it past the conditional median.
    assert miss_limit.tail(chart, 200.0) > 0
    assert sum(miss_limit.tail(chart, d) / miss_limit.tail(chart, 200.0) for d in draws) / len(draws) == pytest.approx(
        0.5, abs=0.03
    )


def test_the_limits_told_the_start_rank_by_the_chance_given_it() -> None:
    chances = [Chance("a", 0.9, True, 0.2), Chance("b", 0.6, False, 0.7), Chance("c", 0.4, True, 0.9)]
    (limit,) = miss_limit.limits(chances, thresholds=(0.5,), given_start=True)
    assert limit.named == 2  # b and c
    assert limit.expected_precision == pytest.approx(0.8)
    assert limit.expected_recall == pytest.approx(1.6 / 1.8)
    assert (limit.precision, limit.recall) == (0.5, 0.5)


def test_the_limits_are_the_chances_summed_over_the_named_charts() -> None:
    chances = [Chance("a", 0.9, True), Chance("b", 0.6, False), Chance("c", 0.4, True), Chance("d", 0.1, False)]
    low, high = miss_limit.limits(chances, thresholds=(0.4, 0.5))
    assert (low.named, high.named) == (3, 2)
    assert low.expected_precision == pytest.approx(1.9 / 3)
    assert low.expected_recall == pytest.approx(1.9 / 2.0)
    assert (low.precision, low.recall) == (pytest.approx(2 / 3), 1.0)
    assert high.expected_precision == pytest.approx(0.75)
    assert high.expected_recall == pytest.approx(1.5 / 2.0)
    assert (high.precision, high.recall) == (0.5, 0.5)
