"""What the plan cannot see in the queue: the charts still to come, and the spread of durations.

Extensions of the contract's ETAs, all off by default (a scenario without them plans exactly
as the contract says):

- **History** (`Scenario.history`): the submissions of the recent past, from which `forecast`
  derives the arrivals the core expects, so the live system, the plan command and the simulator
  share one rule: each org's steady rate with a decay over several windows (an org new within the
  history measured from when it began), bulk uploads set apart as bursts (a risk, not a rate), a
  share of the budget expected of orgs not seen yet while history is thin (coming in over time,
  as they must first arrive), all carried out to the horizon of the backlog they delay.
- **Expected arrivals** (`Scenario.arrivals`), stated directly or derived from history. An org that
  keeps submitting will take its turns in the rounds ahead, and a chart planned without them is
  promised too early. Each `Arrival` says an org is expected to submit one chart of a kind every
  1/rate seconds until `until`. `expected_charts` turns them into queued charts that become available
  when they arrive (`available_at`), so the ordinary fair order and replay place them: behind the
  org's own backlog, or, for an idle org, in the round under way when they arrive, as the live loop
  would. They shape the ETAs of the real charts and are left out of the plan.
- **Medians** (`running_finish`, `median_durations`; the reasons in docs/eta-medians.md). Where a
  chart's spread is known its ETA is the median of its finish: a running chart's is now plus its
  median time left given how long it has run, and the replay frees its lanes then; a queued chart's
  is its start plus its median duration, while it frees its lanes at start + mean (a later start is
  a sum of durations, near the sum of their means). With no spread the plan is the contract's.
- **ETA bands** (`eta_bands`): each chart's p10-p90 finish from the spread of durations (lognormal)
  and of arrivals, its start's and its own duration's added in quadrature; an org's clear-time is
  its median last finish (`median_last_finish`). The five steps and their reasons: docs/eta-bands.md.
- **Late chance** (`late_chance`): each chart's chance of finishing after its due time, read from
  the law its band comes from (a split normal with its median at the ETA); a step without a band.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .durations import Z90
from .model import Arrival, History, QueueColumns

# At most this many expected charts (or a quarter of the queue, if more); past it every org's
# forecast horizon is shortened alike, so a plan's cost stays bounded by its queue.
MAX_EXPECTED = 5_000
# Past this share of the budget taken by arrivals, their feedback on a start's spread stops growing.
# Chosen on the open-arrival simulator (`tools.loadtest.simulate`).
MAX_ARRIVAL_SHARE = 0.45
# Past this share of the budget taken by the expected streams, the horizon they are carried to stops
# growing (at most 1 / (1 - share) times the time the backlog takes alone).
MAX_HORIZON_SHARE = 0.5
# A bulk upload: at least BURST_SIZE charts of one org, each within BURST_GAP seconds of the last,
# and BURST_SIZE or more per BURST_GAP on average (a steady stream of one a second is no burst).
BURST_SIZE = 10
BURST_GAP = 1.0
# The least span a rate is measured over, as a share of the decay: one early chart is not a rate.
MIN_SPAN_SHARE = 0.25
# With no history, orgs not seen yet are expected to take this share of the budget, less what the
# orgs seen take (newcomer risk); the share fades as history grows, by e every decay. They are not
# here yet: with no org seen coming, they are expected to come over NEWCOMER_RAMP decays. Both
# chosen on the open-arrival simulator: a load at once made the head of a cold backlog late and its
# tail early.
NEWCOMER_LOAD = 0.7
NEWCOMER_RAMP = 0.5
# With no org seen to tell what an org submits, a newcomer is expected to take this share of the
# budget; and at most MAX_NEWCOMERS of them are expected (each is a stream of its own).
NEW_ORG_LOAD = 0.05
MAX_NEWCOMERS = 50
# An org's rate is shrunk toward the population's (`_org_prior`) once this many orgs are seen, the
# prior counting as at most PRIOR_EXPOSURE decays of the org's own history.
PRIOR_ORGS = 2
PRIOR_EXPOSURE = 1.0
# An org first seen within the history is measured from its first submission, pushed back by
# NEW_ORG_GAPS of its mean gaps: it began before its first chart came, and one chart is not yet a
# rate. Measured from `since` instead, a new org's rate is underestimated for a whole decay.
NEW_ORG_GAPS = 2.5
# The rates' relative variance is RATE_DOUBT / evidence: more than a Poisson count's (1 / evidence),
# since orgs change pace. Chosen on the open-arrival simulator (`tools.loadtest.simulate`).
RATE_DOUBT = 9.0
# The steady streams together are expected to take at most this share of the budget: a pool cannot
# keep up with more for long, so rates past it are a flurry, not a pace, and are scaled down alike.
# On the simulator it cut the steady workload's p90 error over the wait from 0.90 to 0.69.
MAX_STREAM_LOAD = 1.0
# Bulk uploads are rarer than charts: their rate is measured with this many times the decay.
BURST_MEMORY = 5.0
# The share of a burst's work that lands before a chart already waiting: the bulk org takes its
# turns beside the chart's own org, so less than half of it comes first. Chosen on the simulator.
BURST_AHEAD = 0.4
# An org's median last finish (`median_last_finish`): a chart counts until its CERTAIN_Z quantile
# (P > 0.9999), and the bisection halves the interval this many times.
CERTAIN_Z = 3.719
BISECTIONS = 40
# The farthest z of a normal the clear-time rule works with (its log-tail is then about -5e11).
Z_FAR = 1e6


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the core expects from `Scenario.history` (see `forecast`).

    `arrivals`: the steady streams (the newcomers' among them), until the horizon; `evidence`: the
    (decayed) count of steady submissions their rates rest on; `burst_rate` (bulk uploads per
    second) and `burst_work` (mean cost-unit seconds of one): bursts, which no org's rate foresees;
    `newcomer_load`: the share of the budget expected of orgs not seen yet.
    """

    arrivals: list[Arrival]
    evidence: float
    burst_rate: float
    burst_work: float
    newcomer_load: float


# The org each expected newcomer's charts are given: NEWCOMERS + "-<n>" (no real org id starts with "~").
NEWCOMERS = "~newcomer"

Steady = tuple[str, float, int, float]  # (org, avg, cost, spread): one steady stream


def forecast(history: History, *, now: float, budget: int, backlog: float, typical_avg: float = 0.0) -> Forecast:
    """The arrivals expected from `history`, carried out to the horizon of the charts they affect.

    `backlog` is the cost-unit seconds queued and still to run, over the budget: how long the pool
    takes to drain what it has without arrivals.
    1. Each org's submissions in time order: one within BURST_GAP s of the last joins its group; a
       group of BURST_SIZE charts or more, at BURST_SIZE or more per BURST_GAP, is a bulk upload (a
       burst); the others are steady.
    2. The span of history: now - since, at least MIN_SPAN_SHARE x decay; an org first seen within
       it is measured over its own span, (now - first) x (n + NEW_ORG_GAPS) / n for its n charts
       (no shorter than MIN_SPAN_SHARE x decay, no longer than the span). A steady submission of
       age a counts e^(-a / decay); an org's exposure is decay x (1 - e^(-span / decay)), the same
       weights summed over its span (unbiased on a history shorter than the decay).
    3. Each (org, avg, cost, spread)'s rate: its count over its org's exposure; a young org's (one
       measured over less than the span) shrunk toward what orgs usually do (`_org_prior`,
       gamma-Poisson): with the population's prior (a, b), (n + a) / (exposure + b) for its decayed
       count n, each stream taking its own count and the prior's a as one more stream of the
       population's typical chart, so a young org's first charts are not read as its pace. Past
       MAX_STREAM_LOAD of the budget in all, every rate is scaled down alike to it.
    4. Bursts: their count, decayed BURST_MEMORY times slower, over a span at least MIN_SPAN_SHARE
       of that memory, and their mean work.
    5. The horizon: with rho the share of the budget the streams take (at most MAX_HORIZON_SHARE),
       the backlog drains in backlog / (1 - rho) seconds, and arrivals after a chart's start no
       longer touch it: the streams run until now + that.
    6. Newcomers: orgs not seen yet are expected to take q = max(0, NEWCOMER_LOAD - rho) x
       e^(-span / decay) of the budget, as the orgs they will be (`_newcomers`), each with its own
       turn; q also widens the band (`eta_bands`).
    """
    decay = history.decay
    since = min([history.since, *(s.created for s in history.submissions)])
    span = max(now - since, MIN_SPAN_SHARE * decay)
    memory = BURST_MEMORY * decay
    by_org: dict[str, list[tuple[float, int, float, int, float]]] = defaultdict(list)
    for s in history.submissions:
        if s.created <= now and s.count > 0:
            by_org[s.org].append((s.created, s.count, s.avg, s.cost, s.spread))
    steady: dict[Steady, float] = defaultdict(float)
    exposure: dict[str, float] = {}
    first_seen: dict[str, float] = {}
    young: set[str] = set()
    burst_weight = burst_work = evidence = 0.0
    for org, submissions in by_org.items():
        submissions.sort()
        count = sum(submission[1] for submission in submissions)
        began = (now - submissions[0][0]) * (count + NEW_ORG_GAPS) / count
        seen = min(span, max(began, MIN_SPAN_SHARE * decay))
        groups: list[list[tuple[float, int, float, int, float]]] = []
        last = -math.inf
        for submission in submissions:
            if submission[0] - last > BURST_GAP:
                groups.append([])
            groups[-1].append(submission)
            last = submission[0]
        for group in groups:
            size = sum(count for _, count, *_ in group)
            lasted = max(group[-1][0] - group[0][0], BURST_GAP)
            if size >= BURST_SIZE * lasted / BURST_GAP:
                weight = math.exp(-(now - group[0][0]) / memory)
                burst_weight += weight
                burst_work += weight * sum(count * avg * min(cost, budget) for _, count, avg, cost, _ in group)
                continue
            for created, count, avg, cost, spread in group:
                weight = count * math.exp(-(now - created) / decay)
                steady[(org, avg, cost, spread)] += weight
                evidence += weight
                if org not in exposure:
                    exposure[org] = decay * -math.expm1(-seen / decay)
                    first_seen[org] = created
                    if seen < span:
                        young.add(org)
    rates = _shrunk_rates(steady, exposure, young, decay=decay, budget=budget)
    rho = sum(rate * avg * min(cost, budget) for (_, avg, cost, _), rate in rates.items()) / budget
    if rho > MAX_STREAM_LOAD:
        rates = {key: rate * MAX_STREAM_LOAD / rho for key, rate in rates.items()}
        rho = MAX_STREAM_LOAD
    newcomer_load = max(0.0, NEWCOMER_LOAD - rho) * math.exp(-span / decay)
    expects_newcomers = newcomer_load > 0 and typical_avg > 0
    until = now + backlog / (1.0 - min(rho + (newcomer_load if expects_newcomers else 0.0), MAX_HORIZON_SHARE))
    arrivals = [
        Arrival(org, rate, until, avg, cost, spread) for (org, avg, cost, spread), rate in sorted(rates.items())
    ]
    if expects_newcomers:
        arrivals += _newcomers(
            newcomer_load,
            org_rates=_org_totals(rates),
            first_seen=first_seen,
            since=since,
            now=now,
            until=until,
            decay=decay,
            budget=budget,
            typical_avg=typical_avg,
        )
    return Forecast(
        arrivals=arrivals,
        evidence=evidence,
        burst_rate=burst_weight / (memory * -math.expm1(-max(span, MIN_SPAN_SHARE * memory) / memory)),
        burst_work=burst_work / burst_weight if burst_weight else 0.0,
        newcomer_load=newcomer_load,
    )


def _org_totals(rates: dict[Steady, float]) -> dict[str, float]:
    """Each org's rate: the sum of its streams'."""
    totals: dict[str, float] = defaultdict(float)
    for (org, *_), rate in rates.items():
        totals[org] += rate
    return totals


def _org_prior(counts: dict[str, float], exposure: dict[str, float], decay: float) -> tuple[float, float]:
    """The gamma prior (a, b) of an org's rate, from the population of orgs seen (empirical Bayes),
    so that an org of decayed count n over `exposure` T has the rate (n + a) / (T + b).

    1. The mean rate m = sum n / sum T (pooled), and the spread of the orgs' own rates n / T
       around it, less what a Poisson count alone would spread: v = var(n / T) - m x mean(T2 / T^2),
       T2 = decay / 2 x (1 - e^(-2 span / decay)) the sum of the squared weights over the org's span
       (recovered from T). With fewer than PRIOR_ORGS orgs, no prior (a = b = 0).
    2. The prior's strength b = m / v seconds of exposure (a gamma of mean m and variance v), at
       most PRIOR_EXPOSURE x decay: orgs alike (v <= 0) make the strongest prior; a = m x b.
    """
    if len(counts) < PRIOR_ORGS:
        return 0.0, 0.0
    mean = sum(counts.values()) / sum(exposure.values())
    own = [counts[org] / exposure[org] for org in counts]
    spread = sum((rate - mean) ** 2 for rate in own) / len(own)
    # T = decay (1 - e^(-s / decay)), so 1 - e^(-2 s / decay) = 1 - (1 - T / decay)^2.
    noise = mean * sum(decay / 2 * (1 - (1 - t / decay) ** 2) / t**2 for t in exposure.values()) / len(exposure)
    between = spread - noise
    strongest = PRIOR_EXPOSURE * decay
    strength = strongest if between <= 0 else min(mean / between, strongest)
    return mean * strength, strength


def _shrunk_rates(
    steady: dict[Steady, float], exposure: dict[str, float], young: set[str], *, decay: float, budget: int
) -> dict[Steady, float]:
    """Each stream's rate, a `young` org's shrunk toward the prior (the doc of `forecast`, step 3).

    Only the young: the orgs' rates are skewed (a few large, many small) where a gamma fits only
    roughly, and on the open-arrival simulator's steady workload shrinking every org moved the
    large ones' rates down and their deep charts' ETAs early."""
    counts = _org_totals(steady)
    a, b = _org_prior(counts, exposure, decay) if young else (0.0, 0.0)
    if not b:
        return {key: weight / exposure[key[0]] for key, weight in steady.items()}
    total = sum(steady.values())
    # The population's typical chart: its mean work per chart on one unit, and its mean spread.
    work = sum(weight * avg * min(cost, budget) for (_, avg, cost, _), weight in steady.items()) / total
    spread = sum(weight * sigma for (*_, sigma), weight in steady.items()) / total
    rates: dict[Steady, float] = defaultdict(float)
    for key, weight in steady.items():
        rates[key] += weight / (exposure[key[0]] + (b if key[0] in young else 0.0))
    for org in young:
        rates[(org, work, 1, spread)] += a / (exposure[org] + b)
    return rates


def _newcomers(
    load: float,
    *,
    org_rates: dict[str, float],
    first_seen: dict[str, float],
    since: float,
    now: float,
    until: float,
    decay: float,
    budget: int,
    typical_avg: float,
) -> list[Arrival]:
    """The orgs not seen yet, expected to take `load` of the budget once they have come, as the orgs
    they will be: each its own stream of charts of `typical_avg` seconds (weight 1 in the order, so
    each its own turn in the rounds, as a newcomer has), beginning when it is expected to come.

    1. Each one's rate: what an org seen submits on average (the mean of their rates), or with none
       seen NEW_ORG_LOAD of the budget; so k = ceil(load / its share) of them, which share `load`.
    2. How often they come: the orgs first seen after `since` (weighted e^(-age / decay), and by
       1 - e^(-rate x (first - since)), how unlikely an org of its rate was to be silent until
       then), over the history's exposure, with a prior of k orgs over NEWCOMER_RAMP x decay:
       lambda = (seen + k) / (exposure + NEWCOMER_RAMP x decay) orgs a second.
    3. The j-th comes (j + 1/2) / lambda seconds from now (`Arrival.after`); it counts only if
       before `until`.
    """
    per_org = sum(org_rates.values()) / len(org_rates) * typical_avg / budget if org_rates else NEW_ORG_LOAD
    count = max(1, min(MAX_NEWCOMERS, math.ceil(load / max(per_org, load / MAX_NEWCOMERS))))
    seen = sum(
        math.exp(-(now - first) / decay) * -math.expm1(-org_rates.get(org, 0.0) * (first - since))
        for org, first in first_seen.items()
    )
    ramp = NEWCOMER_RAMP * decay
    every = (decay * -math.expm1(-max(now - since, 0.0) / decay) + ramp) / (seen + count)
    rate = load * budget / count / typical_avg
    return [
        Arrival(f"{NEWCOMERS}-{index}", rate, until, typical_avg, 1, 0.0, after=(index + 0.5) * every)
        for index in range(count)
        if now + (index + 0.5) * every < until
    ]


def expected_charts(
    arrivals: Sequence[Arrival], *, now: float, queued: int, first_key: int | None = None
) -> tuple[QueueColumns, NDArray[np.float64]]:
    """The charts `arrivals` foresee, as queued columns (the numeric ones arrays), with their
    spreads. Their ids sort after any real chart's: "~arrival-N", or `first_key` + N after a
    queue of integer keys.

    The k-th chart of an arrival comes at now + after + (k + 1/2) / rate, while that is before
    `until` (with a ramp, when the expected count rate x (t - ramp x (1 - e^(-t / ramp))) reaches
    k + 1/2, t counted from now + after).
    When all of them together exceed `max(MAX_EXPECTED, queued // 4)`, every horizon is cut by the
    same factor so that they fit.
    """
    streams = [a for a in arrivals if a.rate > 0 and a.until > now + a.after]
    expected = sum(a.rate * (a.until - now - a.after) for a in streams)
    limit = max(MAX_EXPECTED, queued // 4)
    shrink = min(1.0, limit / expected) if expected else 1.0
    times: list[NDArray[np.float64]] = []
    left = limit
    for arrival in streams:
        until = now + (arrival.until - now) * shrink
        begins = now + arrival.after
        comes = (
            np.array(list(islice(_ramped(arrival, begins, until), left)), dtype=np.float64)
            if arrival.ramp > 0
            else _evenly(arrival.rate, begins, until)
        )
        times.append(comes[:left])
        left -= len(times[-1])
    counts = [len(comes) for comes in times]
    total = sum(counts)
    created = np.concatenate(times) if times else np.zeros(0)
    orgs = np.repeat(np.array([arrival.org for arrival in streams], dtype=object), counts)
    avgs = [arrival.avg for arrival in streams]
    # int64 only when every avg is an int, as `QueueColumns.arrays` reads a list
    avg: NDArray[np.float64] | NDArray[np.int64] = (
        np.array(avgs, dtype=np.int64) if all(type(avg) is int for avg in avgs) else np.array(avgs, dtype=np.float64)
    )
    columns = QueueColumns(
        id=[f"~arrival-{index}" for index in range(total)] if first_key is None else first_key + np.arange(total),
        org=orgs.tolist(),
        created=created,
        avg=np.repeat(avg, counts),
        cost=np.repeat(np.array([arrival.cost for arrival in streams], dtype=np.int64), counts),
        available_at=created.copy(),
    )
    return columns, np.repeat(np.array([arrival.spread for arrival in streams], dtype=np.float64), counts)


def _evenly(rate: float, now: float, until: float) -> NDArray[np.float64]:
    """now + (k + 1/2) / rate for k = 0, 1, ... while before `until`."""
    count = max(0, math.ceil((until - now) * rate - 0.5))
    comes: NDArray[Any] = now + (np.arange(count) + 0.5) / rate
    kept = count
    while kept and comes[kept - 1] >= until:  # rounding at the edge
        kept -= 1
    return comes[:kept]


def _ramped(arrival: Arrival, now: float, until: float) -> Iterator[float]:
    """The times at which the expected count of a ramped arrival reaches 1/2, 3/2, ... before `until`.

    The count N(t) = rate x (t - ramp x (1 - e^(-t / ramp))) is increasing and convex, and
    N(wanted / rate + ramp) >= wanted: Newton's method from there comes down to the root from above.
    """
    rate, ramp = arrival.rate, arrival.ramp
    wanted = 0.5
    while True:
        elapsed = wanted / rate + ramp
        for _ in range(60):
            excess = rate * (elapsed + ramp * math.expm1(-elapsed / ramp)) - wanted
            step = excess / (rate * -math.expm1(-elapsed / ramp))
            elapsed -= step
            if step <= 1e-9 * (elapsed + ramp):
                break
        if now + elapsed >= until:
            return
        yield now + elapsed
        wanted += 1.0


@dataclass(frozen=True, slots=True)
class Bands:
    """p10 and p90 of each planned chart's finish (aligned with the charts given)."""

    low: Sequence[float | None]
    high: Sequence[float | None]


@dataclass(frozen=True, slots=True)
class BandEdges:
    """p10 and p90 of each replayed chart's finish, as arrays aligned with the charts given (nan: the
    chart has no start)."""

    low: NDArray[np.float64]
    high: NDArray[np.float64]


def eta_bands(
    *,
    now: float,
    budget: int,
    starts: Sequence[float | None] | NDArray[np.float64],
    avg: Sequence[float] | NDArray[np.float64],
    units: Sequence[int] | NDArray[np.int64],
    spread: Sequence[float] | NDArray[np.float64],
    expected: Sequence[bool] | NDArray[np.bool_],
    running_avg: Sequence[float],
    running_units: Sequence[int],
    running_spread: Sequence[float] | NDArray[np.float64],
    arrivals: Sequence[Arrival] = (),
    foreseen: Forecast | None = None,
) -> BandEdges:
    """The p10-p90 finish of each chart of a replay (docs/eta-bands.md), nan where it has no start.

    `starts` (None or nan: no start), `avg` (the mean durations), `units`, `spread` and `expected`
    describe the replayed charts (expected: an expected arrival), as sequences or arrays, each
    chart's ETA its start + its median duration (`median_durations`); the running charts only add
    their work's variance before every start. `arrivals` widen the start's spread by 1 / (1 - rho),
    rho the share of the budget they take while they last: a later start lets more arrivals in
    before it.
    """
    start = np.asarray(starts, dtype=np.float64)  # None becomes nan
    low, high = np.full(len(start), math.nan), np.full(len(start), math.nan)
    # Only the charts with a start have a band, each worked out in start order (ties in replay
    # order): the work started before a chart is then a running sum, with no scatter and gather
    # per sum. Each chart's arithmetic is the same in any order.
    planned = np.flatnonzero(~np.isnan(start))
    by_start = planned[np.argsort(start[planned], kind="stable")]
    start = start[by_start]
    mean = np.asarray(avg, dtype=np.float64)[by_start]
    sigma = np.asarray(spread, dtype=np.float64)[by_start]
    sigma2 = np.square(sigma)
    is_expected = np.asarray(expected, dtype=bool)[by_start]
    work = np.square(np.asarray(units, dtype=np.float64)[by_start] * mean)
    variance = work * np.where(is_expected, np.exp(sigma2), np.expm1(sigma2))
    running_variance = float(
        np.sum(
            np.square(np.asarray(running_units, dtype=np.float64) * np.asarray(running_avg, dtype=np.float64))
            * np.expm1(np.square(np.asarray(running_spread, dtype=np.float64)))
        )
    )
    # Work started before each chart: cumulative variance in start order.
    real_before = _before(np.where(is_expected, 0.0, variance))
    before = real_before + _before(np.where(is_expected, variance, 0.0))
    # The expected work (cost-unit seconds) started before each chart.
    expected_before = _before(np.where(is_expected, np.sqrt(work), 0.0))
    if foreseen is not None and foreseen.evidence > 0:
        # The rates are measured on `evidence` submissions: their relative variance is 1 / evidence,
        # which the expected work started before a chart carries whole.
        before += RATE_DOUBT * np.square(expected_before) / foreseen.evidence
    start_spread = Z90 * np.sqrt(before + running_variance) / budget
    if arrivals:
        # Arrivals feed back: a later start lets more of them in first. With a share rho of the
        # budget taken by arrivals still coming at a chart's start, its spread grows by 1 / (1 - rho).
        share_until: dict[float, float] = defaultdict(float)
        for arrival in arrivals:
            share_until[arrival.until] += arrival.rate * arrival.avg * min(arrival.cost, budget) / budget
        rho = np.zeros(len(start))
        for until, share in share_until.items():
            rho[start < until] += share
        start_spread /= 1.0 - np.minimum(rho, MAX_ARRIVAL_SHARE)
    early_spread = late_spread = start_spread
    if foreseen is not None:
        early_spread, late_spread = _unforeseen_spreads(start_spread, start - now, foreseen, budget)
    if arrivals:
        # Fewer arrivals than expected: at most none at all (docs/eta-bands.md, step 5).
        none_came = Z90 * np.sqrt(real_before + running_variance) / budget + expected_before / budget
        early_spread = np.minimum(early_spread, none_came)
    # Own duration: lognormal with mean avg, so median avg * e^(-sigma^2 / 2) (`median_durations`):
    # the ETA is start + median, the band its p10 and p90 around it.
    median = median_durations(mean, sigma)
    below = median * -np.expm1(-Z90 * sigma)
    above = median * np.expm1(Z90 * sigma)
    eta = start + median
    low[by_start] = np.maximum(eta - np.hypot(early_spread, below), now)
    high[by_start] = eta + np.hypot(late_spread, above)
    return BandEdges(low, high)


def _before(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """For each chart (in start order), the sum of `values` over the charts started before it."""
    return np.cumsum(values) - values


def _unforeseen_spreads(
    start_spread: NDArray[np.float64], wait: NDArray[np.float64], foreseen: Forecast, budget: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The lower and upper half-widths of each start: `start_spread` and what no rate foresees.

    1. Bursts, which only delay a chart: over a wait w, a Poisson count of bulk uploads
       (burst_rate x w expected), each taking its work or, if less, half the pool for the rest of
       the wait, of which BURST_AHEAD comes before the chart: the p90 of that extra work (mean +
       Z90 x standard deviation), over the budget.
    2. Newcomers, expected at a share q of the budget in the ETA itself: q x w either way, earlier
       as fewer of them may come (at most none: docs/eta-bands.md, step 5), later as more may. With no
       history q is largest and nothing else widens the band: on the live load run the first ETAs of
       a cold start were 60-70% early, and a band open on one side only held 3% of their finishes.

    A term whose rate is 0 (no bursts, no newcomers: a steady pool's history) is 0 for every chart
    and is left out: adding +0.0 to a sum of squares, or to a spread (>= 0), leaves it as it is, so
    the bands are the same to the bit.
    """
    wait = np.maximum(np.nan_to_num(wait, nan=0.0), 0.0)
    early, squares = start_spread, start_spread**2
    if foreseen.burst_rate:
        burst = np.minimum(foreseen.burst_work, wait * budget / 2)
        expected_bursts = foreseen.burst_rate * wait
        burst_delay = BURST_AHEAD * (expected_bursts + Z90 * np.sqrt(expected_bursts)) * burst / budget
        squares = squares + burst_delay**2
    if foreseen.newcomer_load:
        newcomer_shift = wait * foreseen.newcomer_load
        early = start_spread + newcomer_shift
        squares = squares + newcomer_shift**2
    return early, np.sqrt(squares)


def late_chance(
    *,
    now: float,
    due: NDArray[np.float64],
    eta: NDArray[np.float64],
    low: NDArray[np.float64],
    high: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Each chart's chance of finishing after its due time, from the law its band (`low`, `eta`,
    `high`: p10, ETA, p90) comes from; nan where it has no due time or no ETA (nan in `due` or `eta`).

    The law: a split normal with its median at the ETA, each half a half-normal of its own sigma,
    (eta - low) / Z90 below and (high - eta) / Z90 above, so that its p10 and p90 are the band's
    edges. Then for a due time d:
    1. d before the ETA: Phi((eta - d) / sigma_below), above 1/2; d at or after it: Phi((eta - d) /
       sigma_above), at most 1/2. At d = eta the chance is 1/2 exactly: a threshold of 1/2 says
       "the ETA is past its due time".
    2. A half of no width (no band: eta = low = high; or a p10 raised to now) is a step: 1 when the
       ETA is after d, 0 when it is at or before it.
    3. A due time before `now` is 1: the chart has not finished, so it finishes after it.
    4. Phi is taken by erfc (`math.erfc`, exact to rounding), so that a later due time is never
       riskier and 1/2 at the ETA is exact; it runs once per chart with both a due time and an ETA.
    """
    chance = np.full(len(due), np.nan)
    known = np.flatnonzero(~(np.isnan(due) | np.isnan(eta)))
    if not len(known):
        return chance
    ahead = eta[known] - due[known]  # > 0: the ETA is past due
    sigma = np.where(ahead > 0, eta[known] - low[known], high[known] - eta[known]) / Z90
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = np.where(sigma > 0, ahead / sigma, np.where(ahead > 0, np.inf, -np.inf))
    chance[known] = np.where(due[known] < now, 1.0, np.asarray(_ERFC(-z / math.sqrt(2)), dtype=np.float64) / 2)
    return chance


_ERFC = np.frompyfunc(math.erfc, 1, 1)  # math.erfc over an array (numpy has no erfc of its own)


def median_last_finish(
    *,
    now: float,
    org: Sequence[int] | NDArray[np.intp],
    start: Sequence[float | None] | NDArray[np.float64],
    avg: Sequence[float] | NDArray[np.float64],
    spread: Sequence[float] | NDArray[np.float64],
    org_count: int,
    lasted: Sequence[float] | NDArray[np.float64] | None = None,
    eta: Sequence[float | None] | NDArray[np.float64] | None = None,
    quantile: float = 0.5,
) -> NDArray[np.float64]:
    """Each org's median last finish: the time by which all its charts (`org`: each chart's org
    code) have finished with probability 1/2 (or `quantile`), their starts as given and their durations independent
    lognormals of mean `avg` and log-sd `spread` (a chart without a start does not count), each
    given that it has already run `lasted` seconds (a running chart; 0 or less, or no `lasted`: not
    begun); nan for an org none of whose charts has a spread. (`start` may be an array, nan for no
    start.) `eta`: each chart's own median finish as the plan has it (its ETA; none: worked out
    here), so that an org with one chart that counts clears at that chart's ETA to the bit.

    The last of several charts to finish is later than the latest of their ETAs (docs/eta-medians.md).
    1. Each chart's median finish, start + avg x e^(-spread^2 / 2) (a run that has lasted e: its
       median given D > e, as `remaining_time` conditions its ETA); the org's latest (and now) is
       a lower bound L of its median last finish, since the last finish comes after each.
    2. A chart almost surely finished by L (its CERTAIN_Z quantile at or before L, given D > e for
       a run) leaves the probability that all have finished as it is: only the others count. An
       org with one chart that counts clears at L, taken as its latest `eta` where given.
    3. Bisection between L and the latest CERTAIN_Z quantile of those charts for the x at which the
       sum of their log P(finish <= x) is log 1/2 (log `quantile`); for a run that has lasted e, P(D <= x - start |
       D > e) = 1 - Q(z_x) / Q(z_e), the normal tails Q taken in logs (`_log_normal_tail`) so that
       a run far past its usual duration keeps its precision.
    """
    begun = np.asarray(start, dtype=np.float64)  # None becomes nan
    planned = ~np.isnan(begun)
    begun = begun[planned]
    sigma = np.asarray(spread, dtype=np.float64)[planned]
    codes = np.asarray(org, dtype=np.intp)[planned]
    log_median = np.log(np.asarray(avg, dtype=np.float64)[planned]) - np.square(sigma) / 2
    ran = np.zeros(len(begun)) if lasted is None else np.asarray(lasted, dtype=np.float64)[planned]
    given = (ran > 0) & (sigma > 0)
    # z of the time each run has lasted, and log Q of it (0: a chart not begun, Q = 1).
    # A z past Z_FAR (a spread of next to nothing) is taken as Z_FAR: such a run is due by now.
    z_lasted = np.zeros(len(begun))
    with np.errstate(over="ignore"):
        z_lasted[given] = np.minimum((np.log(ran[given]) - log_median[given]) / sigma[given], Z_FAR)
    log_tail = np.where(given, _log_normal_tail(z_lasted), 0.0)
    median_z = np.zeros(len(begun))
    certain_z = np.full(len(begun), CERTAIN_Z)
    for index in np.flatnonzero(given):
        median_z[index] = _tail_quantile(float(z_lasted[index]), float(log_tail[index]), 0.5)
        certain_z[index] = _tail_quantile(float(z_lasted[index]), float(log_tail[index]), _CERTAIN)
    latest = np.full(org_count, float(now))
    np.maximum.at(latest, codes, begun + np.exp(log_median + sigma * median_z))
    latest_eta = latest
    if eta is not None:
        latest_eta = np.full(org_count, float(now))
        np.maximum.at(latest_eta, codes, np.asarray(eta, dtype=np.float64)[planned])
    certain = begun + np.exp(log_median + certain_z * sigma)
    counts = (sigma > 0) & (certain > latest[codes])
    result = np.full(org_count, math.nan)
    if not counts.any():
        return result
    begun, sigma, codes, log_median = begun[counts], sigma[counts], codes[counts], log_median[counts]
    given, z_lasted, log_tail = given[counts], z_lasted[counts], log_tail[counts]
    low = latest.copy()
    high = latest.copy()
    np.maximum.at(high, codes, certain[counts])
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        z = (np.log(np.maximum(middle[codes] - begun, 1e-300)) - log_median) / sigma
        log_finished = np.log(np.maximum(_normal_cdf(z), 1e-300))
        if given.any():
            z_given = z[given]
            log_left = _log_normal_tail(z_given) - log_tail[given]  # log P(D > x | D > e)
            log_finished[given] = np.where(
                z_given > z_lasted[given], np.log(np.maximum(-np.expm1(np.minimum(log_left, 0.0)), 1e-300)), -690.8
            )
        finished = np.bincount(codes, weights=log_finished, minlength=org_count)
        below = finished < math.log(quantile)
        low = np.where(below, middle, low)
        high = np.where(below, high, middle)
    orgs, counted = np.unique(codes, return_counts=True)
    result[orgs] = np.where(counted == 1, latest_eta[orgs], (low[orgs] + high[orgs]) / 2)
    return result


# P(Z <= CERTAIN_Z) for a standard normal Z: the quantile a chart counts until.
_CERTAIN = NormalDist().cdf(CERTAIN_Z)


def _tail_quantile(z_lasted: float, log_tail: float, p: float) -> float:
    """The standard normal's p-quantile given it exceeds `z_lasted` (log Q of which is `log_tail`):
    -Phi^-1((1 - p) x Q(z_lasted)), or past underflow the normal's tail as an exponential of rate
    z_lasted (as `remaining_time`, step 4)."""
    upper = math.log1p(-p) + log_tail
    if upper > -690.0:
        return -_STANDARD.inv_cdf(math.exp(upper))
    return z_lasted - math.log1p(-p) / z_lasted


# Numerical Recipes' erfcc: erfc(x) = t exp(-x^2 + sum c_k t^k), t = 1 / (1 + x / 2), highest first.
_ERFCC = (
    0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
    -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223,
)  # fmt: skip


def _log_normal_tail(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """log Q(z), Q the standard normal's upper tail, to a relative 1.2e-7 of Q however far out
    (Numerical Recipes' erfcc, a Chebyshev fit of erfc, taken in logs: no underflow; |z| at most
    Z_FAR)."""
    x = np.minimum(np.abs(z), Z_FAR) / math.sqrt(2)
    t = 1.0 / (1.0 + 0.5 * x)
    poly = np.zeros_like(t)
    for coefficient in _ERFCC:
        poly = coefficient + t * poly
    log_far = math.log(0.5) + np.log(t) - x * x + poly  # log Q(|z|)
    return np.where(z >= 0, log_far, np.log1p(-np.exp(log_far)))


def _normal_cdf(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """The standard normal distribution function at each z, within 1e-7 (Abramowitz and Stegun
    7.1.26 for erf, in numpy: no call per value)."""
    x = np.abs(z) / math.sqrt(2)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    tail = 0.5 * poly * np.exp(-x * x)
    return np.where(z >= 0, 1.0 - tail, tail)


@dataclass(frozen=True, slots=True)
class Remaining:
    """What is left of a run that has lasted a while: the mean, median, p10 and p90 of D - e given
    D > e."""

    mean: float
    median: float
    low: float
    high: float


def remaining_time(*, elapsed: float, avg: float, sigma: float) -> Remaining:
    """The time left to a run that has lasted `elapsed` (e) seconds, its duration D lognormal with
    mean `avg` and log-sigma `sigma` (> 0): the mean, median, p10 and p90 of D - e given D > e, all
    > 0 for a run begun, with low <= median <= high.

    1. mu = ln(avg) - sigma^2 / 2 and z = (ln e - mu) / sigma, where e has reached in D's law; a run
       not yet begun (e <= 0) has its whole duration (and -e) still to go.
    2. The mean: E[D | D > e] = avg * Phi(sigma - z) / (1 - Phi(z)), each tail by erfc so that it
       keeps its precision far past the median.
    3. The quantiles (p = 0.1, 0.5, 0.9): the p-quantile of D given D > e is exp(mu - sigma *
       Phi^-1((1 - p) * tail)), tail = 1 - Phi(z) (the inverse taken on the small side, exact down
       to tails of 1e-300).
    4. Where the tail underflows (z past ~37) or rounding leaves the results out of order, (log D -
       ln e) / sigma given D > e is exponential with rate z (the normal's tail): mean
       e * sigma / (z - sigma), quantiles e * (e^(sigma * y_p) - 1) with y_p = -ln(1 - p) / z.
    5. The band is the p10-p90 of that law and holds the median, the plan's ETA (`running_finish`);
       a wide law (sigma past ~2.56 for a run not yet begun) has its mean above its p90.
    """
    mu = math.log(avg) - sigma * sigma / 2
    if elapsed <= 0:
        median = math.exp(mu)
        return Remaining(
            avg - elapsed, median - elapsed, median * math.exp(-Z90 * sigma) - elapsed,
            median * math.exp(Z90 * sigma) - elapsed,
        )  # fmt: skip
    z = (math.log(elapsed) - mu) / sigma
    tail = math.erfc(z / math.sqrt(2)) / 2
    if tail > 1e-300:
        mean = avg * math.erfc((z - sigma) / math.sqrt(2)) / 2 / tail - elapsed
        low = math.exp(mu - sigma * _STANDARD.inv_cdf(0.9 * tail)) - elapsed
        median = math.exp(mu - sigma * _STANDARD.inv_cdf(0.5 * tail)) - elapsed
        high = math.exp(mu - sigma * _STANDARD.inv_cdf(0.1 * tail)) - elapsed
        if 0 < low < median < high and mean > 0 and math.isfinite(mean):
            return Remaining(mean, median, low, high)
    z = max(z, 2 * sigma)  # past ~37 here, far beyond any learned sigma

    def left(p: float) -> float:
        return elapsed * math.expm1(-sigma * math.log1p(-p) / z)

    return Remaining(elapsed * sigma / (z - sigma), left(0.5), left(0.1), left(0.9))


_STANDARD = NormalDist()


def running_band(*, now: float, started: Sequence[float], avg: Sequence[float], spread: Sequence[float]) -> Bands:
    """p10-p90 finish of running charts: now plus the p10 and p90 of the time left to each run
    given how long it has lasted (`remaining_time`), around its median (`running_finish`); the ETA
    itself without a spread."""
    low, high = [], []
    for chart_started, mean, sigma in zip(started, avg, spread, strict=True):
        if sigma > 0:
            remaining = remaining_time(elapsed=now - chart_started, avg=mean, sigma=sigma)
            low.append(now + remaining.low)
            high.append(now + remaining.high)
        else:
            finish = max(now, chart_started + mean)
            low.append(finish)
            high.append(finish)
    return Bands(low, high)


def running_finish(*, now: float, started: float, avg: float, sigma: float) -> float:
    """When a running chart is expected to finish: max(now, started + avg) without a spread (the
    contract's rule), else now plus its median time left given how long it has lasted (half of
    such runs have finished by then)."""
    if sigma > 0:
        return now + remaining_time(elapsed=now - started, avg=avg, sigma=sigma).median
    return max(now, started + avg)


def median_durations(avg: NDArray[np.float64], spread: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each chart's median duration, avg x e^(-spread^2 / 2) (a lognormal of mean `avg`, half of
    whose runs are over by then), `avg` itself where it has no spread: its ETA is its start plus
    that."""
    return np.where(spread > 0, avg * np.exp(-np.square(spread) / 2), avg)


def spreads(spread: Sequence[float] | NDArray[np.float64], count: int) -> NDArray[np.float64]:
    """The spreads of `count` charts from their column (`Scenario.spread`, aligned with the charts;
    empty: 0 for each), as an array."""
    if len(spread) == 0:
        return np.zeros(count)
    if len(spread) != count:
        raise ValueError(f"{len(spread)} spreads for {count} charts: the column must be aligned with them")
    return np.asarray(spread, dtype=np.float64)
