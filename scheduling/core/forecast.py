"""What the plan cannot see in the queue: the charts still to come, and the spread of durations.

Two extensions of the contract's ETAs, both off by default (a scenario without them plans exactly as
the contract says):

- **Expected arrivals** (`Scenario.arrivals`). An org that keeps submitting will take its turns in
  the rounds ahead, and a chart planned without them is promised too early. Each `Arrival` says an
  org is expected to submit one chart of a kind every 1/rate seconds until `until`. `expected_charts`
  turns them into queued charts that become available when they arrive (`available_at`), so the
  ordinary fair order and replay place them: behind the org's own backlog, or, for an idle org, in
  the round under way when they arrive, as the live loop would. They shape the ETAs of the real
  charts and are left out of the plan.
- **ETA bands** (`eta_bands`). Each chart's p10-p90 finish from the spread of durations (`spread`:
  the standard deviation of log(duration), lognormal) and of arrivals:
  1. Its start is the sum of the work started before it spread over the budget's lanes, so its
     variance is the sum of those charts' work variances over budget^2: units^2 * avg^2 *
     (e^spread^2 - 1) for a real chart, units^2 * avg^2 * e^spread^2 for an expected arrival (a
     Poisson count of arrivals adds the square of the mean as well). Running charts count first.
  2. Its own duration is lognormal with mean `avg`: its p10 and p90.
  3. The two spreads are independent: the band's half-widths add in quadrature on each side, with
     the normal z of p90 for the start.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .model import Arrival, QueueColumns

# z-score of the 90th percentile of a normal distribution: the band's edges are p10 and p90.
Z90 = 1.2815515655446004
# At most this many expected charts (or a quarter of the queue, if more); past it every org's
# forecast horizon is shortened alike, so a plan's cost stays bounded by its queue.
MAX_EXPECTED = 5_000
# Past this share of the budget taken by arrivals, their feedback on a start's spread stops growing.
MAX_ARRIVAL_SHARE = 0.8


def expected_charts(arrivals: Sequence[Arrival], *, now: float, queued: int) -> tuple[QueueColumns, list[float]]:
    """The charts `arrivals` foresee, as queued columns (ids "~arrival-N"), with their spreads.

    The k-th chart of an arrival comes at now + (k + 1/2) / rate, while that is before `until`.
    When all of them together exceed `max(MAX_EXPECTED, queued // 4)`, every horizon is cut by the
    same factor so that they fit.
    """
    streams = [a for a in arrivals if a.rate > 0 and a.until > now]
    expected = sum(a.rate * (a.until - now) for a in streams)
    limit = max(MAX_EXPECTED, queued // 4)
    shrink = min(1.0, limit / expected) if expected else 1.0
    columns = QueueColumns([], [], [], [], [], [], [], [], [], [])
    spread: list[float] = []
    for arrival in streams:
        until = now + (arrival.until - now) * shrink
        step = 1.0 / arrival.rate
        at = now + step / 2
        while at < until and len(columns) < limit:
            columns.id.append(f"~arrival-{len(columns)}")
            columns.org.append(arrival.org)
            columns.created.append(at)
            columns.avg.append(arrival.avg)
            columns.cost.append(arrival.cost)
            columns.high_priority.append(False)
            columns.paused.append(False)
            columns.priority.append(0)
            columns.available_at.append(at)
            columns.retry.append(False)
            spread.append(arrival.spread)
            at += step
    return columns, spread


@dataclass(frozen=True, slots=True)
class Bands:
    """p10 and p90 of each planned chart's finish (aligned with the charts given)."""

    low: Sequence[float | None]
    high: Sequence[float | None]


def eta_bands(
    *,
    now: float,
    budget: int,
    starts: Sequence[float | None],
    avg: Sequence[float],
    units: Sequence[int],
    spread: Sequence[float],
    expected: Sequence[bool],
    running_avg: Sequence[float],
    running_units: Sequence[int],
    running_spread: Sequence[float],
    arrivals: Sequence[Arrival] = (),
) -> Bands:
    """The p10-p90 finish of each chart of a replay (see the module doc), None where it has no start.

    `starts`, `avg`, `units`, `spread` and `expected` describe the replayed charts (expected: an
    expected arrival); the running charts only add their work's variance before every start.
    `arrivals` widen the start's spread by 1 / (1 - rho), rho the share of the budget they take
    while they last: a later start lets more arrivals in before it.
    """
    if not starts:
        return Bands([], [])
    start = np.array([math.nan if s is None else s for s in starts], dtype=np.float64)
    mean = np.asarray(avg, dtype=np.float64)
    sigma2 = np.square(np.asarray(spread, dtype=np.float64))
    work = np.square(np.asarray(units, dtype=np.float64) * mean)
    variance = work * np.where(np.asarray(expected, dtype=bool), np.exp(sigma2), np.expm1(sigma2))
    running_variance = float(
        np.sum(
            np.square(np.asarray(running_units, dtype=np.float64) * np.asarray(running_avg, dtype=np.float64))
            * np.expm1(np.square(np.asarray(running_spread, dtype=np.float64)))
        )
    )
    # Work started before each chart: cumulative variance in start order (ties in replay order).
    planned = np.flatnonzero(~np.isnan(start))
    by_start = planned[np.argsort(start[planned], kind="stable")]
    before = np.zeros(len(start))
    before[by_start] = np.cumsum(variance[by_start]) - variance[by_start]
    start_spread = Z90 * np.sqrt(before + running_variance) / budget
    if arrivals:
        # Arrivals feed back: a later start lets more of them in first. With a share rho of the
        # budget taken by arrivals still coming at a chart's start, its spread grows by 1 / (1 - rho).
        share_until: dict[float, float] = defaultdict(float)
        for arrival in arrivals:
            share_until[arrival.until] += arrival.rate * arrival.avg * min(arrival.cost, budget) / budget
        started = np.nan_to_num(start, nan=math.inf)
        rho = np.zeros(len(start))
        for until, share in share_until.items():
            rho[started < until] += share
        start_spread /= 1.0 - np.minimum(rho, MAX_ARRIVAL_SHARE)
    # Own duration: lognormal with mean avg, so median avg * e^(-sigma^2 / 2).
    sigma = np.sqrt(sigma2)
    median = mean * np.exp(-sigma2 / 2)
    below = mean - median * np.exp(-Z90 * sigma)
    above = median * np.exp(Z90 * sigma) - mean
    eta = start + mean
    low = np.maximum(eta - np.hypot(start_spread, below), now)
    high = eta + np.hypot(start_spread, above)
    return Bands(_times(low), _times(high))


def running_band(*, now: float, started: Sequence[float], avg: Sequence[float], spread: Sequence[float]) -> Bands:
    """p10-p90 finish of running charts: their duration's p10 and p90 from their start, not before now."""
    low, high = [], []
    for chart_started, mean, sigma in zip(started, avg, spread, strict=True):
        median = mean * math.exp(-sigma * sigma / 2)
        low.append(max(now, chart_started + median * math.exp(-Z90 * sigma)))
        high.append(max(now, chart_started + median * math.exp(Z90 * sigma)))
    return Bands(low, high)


def _times(values: NDArray[np.float64]) -> list[float | None]:
    return [None if math.isnan(value) else value for value in values.tolist()]


def spreads(ids: Sequence[str], spread: Mapping[str, float]) -> list[float]:
    """Each chart's spread by id (0 where none is known)."""
    if not spread:
        return [0.0] * len(ids)
    return [spread.get(chart_id, 0.0) for chart_id in ids]
