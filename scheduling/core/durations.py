"""How the ETAs learn a pair's run durations: one pure rule, `duration_learn`, from finished runs.

The state of an (org, workflow) pair is a fading mean of the run seconds, a fading mean and variance
of log(seconds), and the streak of the latest runs outside the pair's usual band. A run is weighed
1 / min(runs known, DURATION_MEMORY), so older runs fade once DURATION_MEMORY are known. Once
WARMUP_RUNS runs are known (before, against the workflow's runs over every org if given):

1. A run more than CHANGE_SIGMAS spreads of log-duration from the mean (never under SIGMA_FLOOR)
   joins the streak of its side (above or below); a run inside the band, or on the other side, ends
   the streak. A run that started no later than a run learned inside the band, or with the streak's
   latest (within SAME_START_SECONDS), neither joins nor ends it: that is the order of finishes.
2. A run more than HOLD_SIGMAS spreads away is held out of the means: it only counts in the streak
   (one that ran across an outage of the workers says nothing of the next runs).
3. CHANGE_RUNS runs in a row on one side are a lasting change, not outliers: the state restarts
   from those runs, keeping its spread.
4. Any other run is added with its weight.

Why these steps, with their evidence: docs/eta-durations.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

DURATION_MEMORY = 50
WARMUP_RUNS = 5
HOLD_SIGMAS = 3.0
CHANGE_SIGMAS = 1.5
CHANGE_RUNS = 4
SIGMA_FLOOR = 0.3
SAME_START_SECONDS = 1.0
# `DurationState.learned` stops here: a run in flight then weighs 1e-4 (`in_flight_weight`), so nothing.
LEARNED_CAP = 10 * DURATION_MEMORY
MIN_SECONDS = 0.001
# `duration_censored` iterates at most CENSORED_STEPS times, until a step moves less than the tolerance.
CENSORED_STEPS = 200
CENSORED_TOLERANCE = 1e-9
# z-score of the 90th percentile of a normal distribution: the band's edges are p10 and p90.
Z90 = 1.2815515655446004


@dataclass(frozen=True)
class DurationState:
    """What is kept of one pair's runs: `count` runs' worth of fading means, and the streak of the
    latest runs beyond the change band (`streak` > 0 above, < 0 below; their raw sums alongside)."""

    count: int = 0
    mean_seconds: float = 0.0
    mean_log: float = 0.0
    var_log: float = 0.0
    streak: int = 0
    streak_seconds: float = 0.0
    streak_log: float = 0.0
    settled_started: float | None = None  # the latest start of a run learned inside the band
    streak_started: float | None = None  # the latest start of the streak's runs
    learned: int = 0  # runs learned since the state began or restarted, at most LEARNED_CAP (not the memory)

    @property
    def runs_learned(self) -> int:
        """`learned`, at least `count` (a state kept before `learned` was reads as its count)."""
        return max(self.learned, self.count)

    @property
    def log_sigma(self) -> float | None:
        """Standard deviation of log(duration); None under two runs."""
        return math.sqrt(max(0.0, self.var_log)) if self.count >= 2 else None


def predictive_sigma(state: DurationState) -> float | None:
    """The spread of the pair's next run's log-duration: the learned spread widened by the doubt of
    n runs, sigma^2 (n + 1) / (n - 1), and by a Student t's tails at p10 and p90 (n - 1 degrees, by
    Cornish-Fisher); None under two runs. The reasons: docs/eta-durations.md."""
    if state.count < 2:
        return None
    freedom = state.count - 1
    tails = 1.0 + (Z90**2 + 1.0) / (4.0 * freedom) + (5.0 * Z90**4 + 16.0 * Z90**2 + 3.0) / (96.0 * freedom**2)
    return tails * math.sqrt(max(0.0, state.var_log) * (state.count + 1) / freedom)


def duration_estimate(state: DurationState) -> tuple[float, float] | None:
    """(mean seconds, log sigma of the next run: `predictive_sigma`) that the ETAs use for the
    pair; None before its first run."""
    if state.count == 0:
        return None
    return state.mean_seconds, predictive_sigma(state) or 0.0


def duration_learn(
    state: DurationState, seconds: float, *, usual: tuple[float, float] | None = None, started: float | None = None
) -> DurationState:
    """The state after one more finished run of `seconds`, begun at `started` (any clock; None: not
    known), by steps 1 to 4 of the module's docstring. `usual` is the (mean, sigma) of log-duration to
    tell outliers by under WARMUP_RUNS runs (its workflow's); without it a young pair takes runs as they are."""
    seconds = max(seconds, MIN_SECONDS)
    log = math.log(seconds)
    band = _band(state, usual)
    kept: dict[str, Any] = {"streak": 0, "streak_seconds": 0.0, "streak_log": 0.0, "streak_started": None}
    if band is not None:
        mean_log, sigma = band
        distance = log - mean_log
        side = 1 if distance > 0 else -1
        if abs(distance) <= CHANGE_SIGMAS * sigma:
            kept["settled_started"] = _latest(state.settled_started, started)
        elif _overtaken(state, started, side):
            kept = {}
        else:
            runs, total, logs = 1, seconds, log
            if state.streak * side > 0:
                runs, total, logs = abs(state.streak) + 1, state.streak_seconds + seconds, state.streak_log + log
            latest = _latest(state.streak_started, started)
            if runs >= CHANGE_RUNS:
                return DurationState(
                    runs, total / runs, logs / runs, state.var_log, settled_started=latest, learned=runs
                )
            kept = {"streak": side * runs, "streak_seconds": total, "streak_log": logs, "streak_started": latest}
        if abs(distance) > HOLD_SIGMAS * sigma:
            return replace(state, **kept)
    weight = 1.0 / min(state.count + 1, DURATION_MEMORY)
    delta = log - state.mean_log
    return replace(
        state,
        count=min(state.count + 1, DURATION_MEMORY),
        learned=min(state.runs_learned + 1, LEARNED_CAP),
        mean_seconds=state.mean_seconds + weight * (seconds - state.mean_seconds),
        mean_log=state.mean_log + weight * delta,
        var_log=(1.0 - weight) * (state.var_log + weight * delta * delta),
        **kept,
    )


def _overtaken(state: DurationState, started: float | None, side: int) -> bool:
    """Step 1's exception: the run started no later than a usual run learned, or with the streak's latest."""
    settled, streak = state.settled_started, state.streak_started if state.streak * side > 0 else None
    return started is not None and (
        (settled is not None and started <= settled + SAME_START_SECONDS)
        or (streak is not None and abs(started - streak) <= SAME_START_SECONDS)
    )


def _latest(known: float | None, started: float | None) -> float | None:
    return known if started is None else started if known is None else max(known, started)


def _band(state: DurationState, usual: tuple[float, float] | None) -> tuple[float, float] | None:
    """(mean, sigma floored) of log-duration that a run is measured against, or None: too little known."""
    if state.count >= WARMUP_RUNS:
        return state.mean_log, max(state.log_sigma or 0.0, SIGMA_FLOOR)
    if usual is not None:
        return usual[0], max(usual[1], SIGMA_FLOOR)
    return None


def duration_censored(state: DurationState, lasted: Sequence[float], *, spread: float) -> DurationState:
    """The pair's state as the ETAs read it while runs of it are in flight: each that has lasted e > 0
    counts as a run longer than e (censored) unless past HOLD_SIGMAS spreads (held out, as a finished
    one would be), weighed by `in_flight_weight`; the log-mean and spread are the maximum likelihood
    of both (EM), `spread` standing in while the state knows none. Why: docs/eta-survivorship.md."""
    weight = in_flight_weight(state)
    if state.count == 0 or weight == 0:
        return state
    fixed = state.count < 2 or not state.var_log
    mu = state.mean_log
    sigma = max(spread, 0.0) if fixed else math.sqrt(state.var_log)
    held = HOLD_SIGMAS * max(sigma, SIGMA_FLOOR)
    logs = [math.log(e) for e in lasted if e > 0 and math.log(e) - mu <= held]
    if not logs or sigma <= 0:
        return state
    count, total = state.count, state.count + weight * len(logs)
    known_square = count * (state.var_log + state.mean_log**2)
    for _ in range(CENSORED_STEPS):
        first = second = 0.0
        for log in logs:
            z = (log - mu) / sigma
            ratio = _inverse_mills(z)
            expected = mu + sigma * ratio
            first += expected
            second += sigma**2 * (1 + z * ratio - ratio**2) + expected**2
        new_mu = (count * state.mean_log + weight * first) / total
        new_sigma = sigma if fixed else math.sqrt(max((known_square + weight * second) / total - new_mu**2, 0.0))
        moved = abs(new_mu - mu) + abs(new_sigma - sigma)
        mu, sigma = new_mu, new_sigma
        if moved < CENSORED_TOLERANCE or sigma <= 0:
            break
    var_log = state.var_log if fixed else sigma**2
    factor = math.exp(mu - state.mean_log + (var_log - state.var_log) / 2)
    return replace(state, mean_seconds=state.mean_seconds * factor, mean_log=mu, var_log=var_log)


def in_flight_weight(state: DurationState) -> float:
    """A run in flight's weight beside a finished one: the share of the memory still on the runs learned
    before it was full, (1 - 1 / DURATION_MEMORY) ^ (learned - DURATION_MEMORY). Why: docs/eta-survivorship.md."""
    if state.runs_learned >= LEARNED_CAP:
        return 0.0
    return (1.0 - 1.0 / DURATION_MEMORY) ** max(0, state.runs_learned - DURATION_MEMORY)


_STANDARD = NormalDist()


def _inverse_mills(z: float) -> float:
    """phi(z) / Q(z), Q the standard normal's upper tail: E[Z | Z > z]; about z far out."""
    tail = math.erfc(z / math.sqrt(2)) / 2
    if tail < 1e-300 or z > 30:
        return z + 1 / z
    return _STANDARD.pdf(z) / tail
