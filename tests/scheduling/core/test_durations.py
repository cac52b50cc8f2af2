"""The duration learning rule (`core.durations`) on seeded lognormal runs (log-sigma 0.2): a step
change x4 or x1/4 is learned within 25% after 10 runs, a lone run 75x the usual moves the mean by at
most 10%, and a steady pair's spread is learned as well as the sample's own (bench/bench_durations.py
prints the figures)."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.durations import (
    CHANGE_RUNS,
    DURATION_MEMORY,
    DurationState,
    duration_estimate,
    duration_learn,
)

SIGMA = 0.2
MEDIAN = 8.0
SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


def runs(rng: random.Random, median: float, count: int) -> list[float]:
    return [median * math.exp(rng.gauss(0.0, SIGMA)) for _ in range(count)]


def learn(runs: list[float], state: DurationState | None = None) -> DurationState:
    state = state or DurationState()
    for seconds in runs:
        state = duration_learn(state, seconds)
    return state


def mean(state: DurationState) -> float:
    estimate = duration_estimate(state)
    assert estimate is not None
    return estimate[0]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(seed=SEEDS, factor=st.sampled_from([4.0, 0.25]))
def test_a_step_change_is_learned_within_a_quarter_after_ten_runs(seed: int, factor: float) -> None:
    rng = random.Random(seed)
    steady = learn(runs(rng, MEDIAN, 100))
    changed = learn(runs(rng, MEDIAN * factor, 10), steady)
    assert abs(mean(changed) / (MEDIAN * factor * math.exp(SIGMA**2 / 2)) - 1) <= 0.25


@settings(max_examples=300, derandomize=True, deadline=None)
@given(seed=SEEDS, steady_runs=st.integers(min_value=10, max_value=200))
def test_a_lone_run_75_times_the_usual_moves_the_mean_at_most_a_tenth(seed: int, steady_runs: int) -> None:
    steady = learn(runs(random.Random(seed), MEDIAN, steady_runs))
    assert abs(mean(duration_learn(steady, 75 * MEDIAN)) / mean(steady) - 1) <= 0.10


def test_a_steady_pair_s_spread_is_learned_as_well_as_its_sample_s() -> None:
    """The sample standard deviation of 30 normal draws is within 20% of the truth only ~87% of the
    time (relative standard error 1 / sqrt(58) = 0.13): no rule meets it on every seed, so over 1000
    seeds at least 85% must, and the rule must do as well as the sample itself on each seed but a few."""
    errors, sample_errors = [], []
    for seed in range(1000):
        drawn = runs(random.Random(seed), MEDIAN, 30)
        errors.append(abs((learn(drawn).log_sigma or 0.0) / SIGMA - 1))
        logs = [math.log(seconds) for seconds in drawn]
        centre = sum(logs) / len(logs)
        sample_errors.append(abs(math.sqrt(sum((log - centre) ** 2 for log in logs) / len(logs)) / SIGMA - 1))
    assert sum(error <= 0.2 for error in errors) >= 850
    assert sum(error <= 0.2 for error in errors) >= sum(error <= 0.2 for error in sample_errors) - 10


@settings(max_examples=200, derandomize=True, deadline=None)
@given(durations=st.lists(st.floats(min_value=0.0, max_value=1e7), min_size=1, max_size=150))
def test_the_state_stays_sound_on_any_runs(durations: list[float]) -> None:
    state = learn(durations)
    estimate = duration_estimate(state)
    assert estimate is not None
    assert 0 < state.count <= DURATION_MEMORY
    assert estimate[0] > 0
    assert estimate[1] >= 0
    assert abs(state.streak) < CHANGE_RUNS


def test_nothing_is_estimated_before_the_first_run() -> None:
    assert duration_estimate(DurationState()) is None
