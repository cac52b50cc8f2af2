"""The duration learning rule (`core.durations`) on seeded lognormal runs (log-sigma 0.2): a step
change x4 or x1/4 is learned within 25% after 10 runs, a lone run 75x the usual moves the mean by at
most 10%, and a steady pair's spread is learned as well as the sample's own (bench/bench_durations.py
prints the figures)."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.durations import (
    CHANGE_RUNS,
    DURATION_MEMORY,
    DurationState,
    duration_censored,
    duration_estimate,
    duration_learn,
    predictive_sigma,
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


def _next_run_inside(sigma_of, *, runs_known: int, trials: int = 4000) -> float:
    """The share of next runs inside the p10-p90 band of log-duration built from a pair's learned
    mean and `sigma_of(state)`, the pair having `runs_known` runs (lognormal, log-sigma 0.5)."""
    rng, inside, z90 = random.Random(runs_known), 0, 1.2815515655446004
    for _ in range(trials):
        state = learn([MEDIAN * math.exp(rng.gauss(0.0, 0.5)) for _ in range(runs_known)])
        distance = rng.gauss(0.0, 0.5) + math.log(MEDIAN) - state.mean_log
        inside += abs(distance) <= z90 * sigma_of(state)
    return inside / trials


def test_a_young_pair_s_band_counts_the_doubt_of_its_learned_mean() -> None:
    """A mean learned from n runs is itself off by sigma / sqrt(n), and n runs' variance is short by
    (n - 1) / n: the spread the ETAs use is the next run's (a Student t's), so a young pair's
    p10-p90 band holds its next run 77-81% of the time, where the bare learned spread held it
    41-75% of the time (2 to 30 runs)."""
    for runs_known in (2, 3, 5, 10, 30):
        bare = _next_run_inside(lambda state: state.log_sigma or 0.0, runs_known=runs_known)
        predictive = _next_run_inside(lambda state: predictive_sigma(state) or 0.0, runs_known=runs_known)
        assert bare < 0.76
        assert 0.76 <= predictive <= 0.83, (runs_known, predictive)


def test_the_spread_used_is_the_next_run_s() -> None:
    assert predictive_sigma(DurationState()) is None
    assert predictive_sigma(learn([10.0])) is None
    state = learn(runs(random.Random(7), MEDIAN, 5))
    # Wider than the 5 runs' unbiased spread with the mean's doubt, by the t's tails (4 degrees).
    assert predictive_sigma(state) == pytest.approx(math.sqrt(state.var_log * 6 / 4) * 1.533 / 1.2816, rel=0.02)
    assert duration_estimate(state) == (state.mean_seconds, predictive_sigma(state))
    # A long-known pair's spread is its own, give or take the memory's 4%.
    steady = learn(runs(random.Random(8), MEDIAN, 200))
    assert predictive_sigma(steady) == pytest.approx(steady.log_sigma, rel=0.05)


def _started_together(seed: int, *, count: int, sigma: float, now: float) -> tuple[list[float], list[float]]:
    """`count` runs of mean 60 s (log-sigma `sigma`) started at 0, 1, 2, ... s: the seconds of
    those finished by `now` (in finish order) and how long the others have lasted."""
    rng = random.Random(seed)
    mu = math.log(60.0) - sigma**2 / 2
    runs = [(start, math.exp(rng.gauss(mu, sigma))) for start in range(count)]
    finished = sorted((start + seconds, seconds) for start, seconds in runs if start + seconds <= now)
    lasted = [now - start for start, seconds in runs if start + seconds > now]
    return [seconds for _, seconds in finished], lasted


def _sample_state(seconds: list[float]) -> DurationState:
    """The state of exactly these runs, each weighed alike (a young pair's, no run held out)."""
    logs = [math.log(run) for run in seconds]
    return DurationState(
        count=len(seconds),
        mean_seconds=statistics.fmean(seconds),
        mean_log=statistics.fmean(logs),
        var_log=statistics.pvariance(logs),
    )


@pytest.mark.parametrize("now", [60.0, 75.0, 90.0, 120.0])
def test_runs_still_going_count_as_runs_longer_than_they_have_lasted(now: float) -> None:
    """Survivorship: of a pair's first runs, the ones finished first are its short ones; learned from
    them alone its mean is low (13-41% at the median here) until the long ones end, and every chart
    planned behind it starts early. Counted as runs known to last longer than they have (censored),
    the runs in flight take that back: over 400 draws the median mean is within 2% of the mean of
    all the runs begun (finished or not), what a learner told every run's duration would have."""
    alone, counted, told = [], [], []
    for seed in range(400):
        finished, lasted = _started_together(seed, count=12, sigma=0.6, now=now)
        if len(finished) < 2:
            continue
        state = _sample_state(finished)
        alone.append(state.mean_seconds)
        counted.append(duration_censored(state, lasted, spread=0.5).mean_seconds)
        told.append(statistics.fmean([*finished, *(_true_seconds(seed, now=now))]))
    assert len(counted) > 300
    assert statistics.median(alone) < 0.9 * statistics.median(told)
    assert abs(statistics.median(counted) / statistics.median(told) - 1.0) <= 0.02


def _true_seconds(seed: int, *, now: float) -> list[float]:
    """The durations of the runs of `_started_together(seed, count=12, sigma=0.6)` still going at `now`."""
    rng = random.Random(seed)
    mu = math.log(60.0) - 0.6**2 / 2
    runs = [(start, math.exp(rng.gauss(mu, 0.6))) for start in range(12)]
    return [seconds for start, seconds in runs if start + seconds > now]


@pytest.mark.parametrize("lanes", [2, 10, 20])
def test_runs_in_flight_past_a_full_memory_count_the_long_tail_once(lanes: int) -> None:
    """A pair run back to back on `lanes` lanes (a bulk upload, log-sigma 0.6): while its memory is
    not full its finished runs and those in flight are every run it began, and counting the ones in
    flight is exact; once its memory is full, its finished runs are its runs as they come, and the
    ones in flight (length-biased: the long ones are still going) would count the long tail twice
    (1.12-1.15x the truth on 20 lanes after 120-400 finishes), were they not faded out as the memory
    forgets the runs it learned young. Over 60 draws, at every count of finishes from 30 to 400, the
    median mean is within 3% of the truth."""
    checkpoints = (30, 49, 60, 80, 120, 200, 400)
    ratios: dict[int, list[float]] = {count: [] for count in checkpoints}
    for seed in range(60):
        for count, state, lasted in _back_to_back(seed, lanes=lanes, sigma=0.6, runs=420, at=checkpoints):
            ratios[count].append(duration_censored(state, lasted, spread=0.5).mean_seconds / 60.0)
    for count, seen in ratios.items():
        assert abs(statistics.median(seen) - 1.0) <= 0.03, (count, statistics.median(seen))


def _back_to_back(
    seed: int, *, lanes: int, sigma: float, runs: int, at: tuple[int, ...]
) -> list[tuple[int, DurationState, list[float]]]:
    """`runs` lognormal runs of mean 60 s on `lanes` lanes, each starting as one ends, learned as they
    finish; at each count of finishes in `at`, (that count, the state, what each run in flight has lasted)."""
    rng = random.Random(seed)
    mu = math.log(60.0) - sigma**2 / 2
    going = [(math.exp(rng.gauss(mu, sigma)), 0.0) for _ in range(lanes)]
    started, finished, state = lanes, 0, DurationState()
    seen = []
    while going:
        going.sort()
        end, start = going.pop(0)
        state, finished = duration_learn(state, end - start, started=start), finished + 1
        if started < runs:
            going.append((end + math.exp(rng.gauss(mu, sigma)), end))
            started += 1
        if finished in at:
            seen.append((finished, state, [end - begun for _, begun in going]))
    return seen


@settings(max_examples=200, derandomize=True, deadline=None)
@given(seed=SEEDS)
def test_a_steady_pair_s_runs_in_flight_move_its_mean_little(seed: int) -> None:
    """Once a pair's memory is full its finished runs are its runs as they come; its one or two runs
    in flight (each lasted some of a usual run) move the mean by under 3%, and no run in flight moves
    nothing."""
    rng = random.Random(seed)
    state = learn(runs(rng, MEDIAN, 2 * DURATION_MEMORY))
    lasted = [rng.uniform(0.0, MEDIAN) for _ in range(rng.randint(1, 2))]
    assert abs(duration_censored(state, lasted, spread=0.5).mean_seconds / state.mean_seconds - 1) < 0.03
    assert duration_censored(state, [], spread=0.5) == state


def test_a_run_in_flight_far_past_the_usual_is_held_out_as_a_finished_one_would_be() -> None:
    """A run beyond HOLD_SIGMAS spreads of the pair's usual (stuck, or across an outage) says nothing
    of the next runs: in flight it moves the mean no more than it would once finished (so it stays
    "running longer than usual"); a run in flight within them still counts."""
    state = learn([40.0, 60.0, 90.0])
    assert duration_censored(state, [600.0], spread=0.5) == state
    assert duration_censored(state, [100.0], spread=0.5).mean_seconds > state.mean_seconds


def _learn_in_finish_order(state: DurationState, started_runs: list[tuple[float, float]]) -> list[DurationState]:
    """Each state as the runs (start, seconds) finish, fed in finish order with their starts."""
    states = []
    for start, seconds in sorted(started_runs, key=lambda run: run[0] + run[1]):
        state = duration_learn(state, seconds, started=start)
        states.append(state)
    return states


def _steady(seed: int, sigma: float) -> DurationState:
    """A pair's 100 runs of median MEDIAN, one after another (each started when the last finished)."""
    rng, start, state = random.Random(seed), 0.0, DurationState()
    for _ in range(100):
        seconds = MEDIAN * math.exp(rng.gauss(0.0, sigma))
        state = duration_learn(state, seconds, started=start)
        start += seconds
    return state


@settings(max_examples=100, derandomize=True, deadline=None)
@given(seed=SEEDS)
def test_a_bulk_upload_started_together_is_no_lasting_change(seed: int) -> None:
    """Runs started together finish shortest first: a bulk upload's first finishers are its short
    tail in a row, its last ones its long tail in a row, with no change in the truth (on bursty load
    a pair's mean went 69 s -> 228 s so). A run that started no later than a usual run already
    finished, or with the streak's latest run, is the order of finishes, not a change: the pair's
    memory never restarts, and its mean stays within 35% of the truth through a bulk three times its
    memory (without the exception it restarted on 120 of 200 seeds, and reached 2x). What is left is
    the fading memory's lean to the last finishers, the bulk's long tail: at most +27% on 200 seeds."""
    sigma = 0.25
    steady = _steady(seed, sigma)
    rng, began = random.Random(seed + 1), 10_000.0
    bulk = [(began, MEDIAN * math.exp(rng.gauss(0.0, sigma))) for _ in range(150)]
    truth = MEDIAN * math.exp(sigma**2 / 2)
    for state in _learn_in_finish_order(steady, bulk):
        assert abs(mean(state) / truth - 1) <= 0.35
        assert state.count == DURATION_MEMORY


@settings(max_examples=200, derandomize=True, deadline=None)
@given(seed=SEEDS, factor=st.sampled_from([4.0, 0.25]))
def test_a_step_change_among_overlapping_runs_is_learned_within_ten_runs(seed: int, factor: float) -> None:
    """The change that the finish order must not hide: after a step change x4 or x1/4, runs of the pair
    start a tenth of a usual run apart (ten at once in flight) and finish out of their start order;
    the mean is within 25% of the new truth once 10 of them have finished."""
    steady = _steady(seed, SIGMA)
    rng, began = random.Random(seed + 1), 10_000.0
    spaced = [(began + i * MEDIAN / 10, MEDIAN * factor * math.exp(rng.gauss(0.0, SIGMA))) for i in range(10)]
    changed = _learn_in_finish_order(steady, spaced)[-1]
    assert abs(mean(changed) / (MEDIAN * factor * math.exp(SIGMA**2 / 2)) - 1) <= 0.25
