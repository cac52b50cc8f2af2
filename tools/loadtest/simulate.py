"""`python -m tools.loadtest.simulate`: an open-arrival simulator that scores ETA predictors
on the same charts, over the core and the live loop's shell rules, in a minute or two.

Work keeps arriving, so an ETA made now is overtaken, fairly, by charts that do not exist yet. The
simulator measures how much that costs each predictor against the best any predictor could do.

Steps:
1. A workload: charts (org, kind, arrival, true duration), drawn from a seed. `steady` (Poisson at
   load 0.95), `bursty` (Poisson at load 0.6 plus bulk uploads of 50-300 charts from one org at a
   time, about 1 in all), `cold_start` (one org's 300-chart backfill at t = 0, ten small orgs
   trickling in from the first minute), `drift` (Poisson at load 0.8; halfway through, the busiest
   org's medium workflow takes 3x as long: its charts submitted from then on). Each has promises
   (`promised`): every org a turnaround target, every chart its own due time drawn around it, the
   targets chosen so that 10-30% of each org's charts miss under the plain fair order.
2. The schedule (`simulate`), event-driven: decision instants are arrivals, finishes and the
   sample instants. At each one, as the live loop does: count the finishes, let the arrivals in,
   give each org its place in the rounds (`scheduling.core.service`, the shell's rule), take the core's fair
   order and walk it (`dispatch_walk`); a fair-tier start adds to its org's service. The state
   before each walk is kept at the sample instants (`Moment`). The order never depends on the
   ETAs, so one schedule serves every predictor.
3. The predictors, at every kept moment, for the charts waiting and running then (`PREDICTORS`):
   fairsched's plan from the submissions so far (`history`), today's one-window forecast, the floor
   (the plan told every chart that will arrive, with their arrival times and true mean durations:
   what it misses is the durations' own spread), the naive pending x average / capacity, and queue
   depth ahead / recent drain rate. The durations the predictors other than the floor are given
   (`DURATIONS`): the truth (each chart's true mean and spread), or learned as the live system
   learns them (`Learned`: the core's `duration_learn` fed the runs finished so far, with the
   snapshot's fallbacks).
4. The scores (`score`): error = |ETA - finish| / (finish - time of the ETA), at enqueue and
   sampled over the wait and over the run (running charts, also apart), split by deep (waited >= 5
   mean durations) and shallow; org clear-time error; band coverage and median width relative to
   the time left; on a drift, the sampled error before the change and once the changed workflow
   has run DRIFT_RUNS times since. At-risk: fairsched's and the floor's late chances (the plan's
   chance of finishing after the due time) at enqueue and at half the wait, "will miss" (>= AT_RISK)
   against finishing after the due time: precision and recall (`MissFigures`).
5. Due first (`orders_run`): the same promised workloads in the plain fair order and with
   `Scenario.due_first` (each org's charts by due time inside its share): attainment (the share of
   charts finished by their due time) per org and overall, and the load report's fairness checks
   (`fairness_of`: weighted Jain over saturated windows, small orgs' first start within one round).
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduling.core import (
    Arrival,
    History,
    OrgPolicy,
    PastSubmission,
    QueuedChart,
    RunningChart,
    Scenario,
    dispatch_walk,
    fair_order,
    plan,
)
from scheduling.core.durations import (
    WARMUP_RUNS,
    DurationState,
    duration_censored,
    duration_learn,
    predictive_sigma,
)
from scheduling.core.forecast import median_last_finish
from scheduling.core.model import Plan, Policy
from scheduling.core.service import OrgService, fair_service, start_service
from tools.loadtest import metrics
from tools.loadtest.document import Table, markdown_table
from tools.loadtest.metrics import ErrorFigures, error_figures, quantile

# The live loop's default arrival window (`SchedulerConfig.arrival_window`): today's forecast.
ARRIVAL_WINDOW = 600.0
# The history the live snapshot passes: this many arrival windows.
HISTORY_DECAYS = 5.0
# A chart is deep when it waited this many mean durations or more.
DEEP_WAITS = 5.0
# Org clear-times are scored once this much history exists (one arrival window).
CLEAR_AFTER = ARRIVAL_WINDOW
# The drift target: this many runs of the changed workflow after the change, the ETAs made from then
# on are judged against those made before it.
DRIFT_RUNS = 10
# What the live system expects of a chart nothing is known of (FAIRSCHED_DEFAULT_DURATION and
# FAIRSCHED_DEFAULT_DURATION_SPREAD's defaults).
DEFAULT_DURATION = 60.0
DEFAULT_SPREAD = 0.5
# The orgs of the fewest charts (the last of the skewed shares) whose first start the fairness check
# follows on the workloads where every org trickles in.
SMALL_ORGS = 4


@dataclass(frozen=True, slots=True)
class Kind:
    """A workflow: lognormal durations of mean `mean` and log-sigma `sigma`, `cost` units each."""

    name: str
    mean: float
    sigma: float
    cost: int


KINDS = (Kind("short", 30.0, 0.5, 1), Kind("medium", 60.0, 0.6, 1), Kind("long", 120.0, 0.4, 2))


@dataclass(frozen=True, slots=True)
class SimChart:
    """A chart: its true duration drawn from its kind's law, scaled by `factor` (a drift); `due`:
    when its turnaround promise falls due (None: no promise)."""

    id: str
    org: str
    kind: Kind
    arrival: float
    duration: float
    factor: float = 1.0
    due: float | None = None

    @property
    def mean(self) -> float:
        """The true mean of its duration."""
        return self.kind.mean * self.factor


@dataclass(frozen=True, slots=True)
class Drift:
    """From `at` on, the charts of `org`'s `kind` take `factor` times as long."""

    org: str
    kind: str
    at: float
    factor: float


@dataclass
class Workload:
    """The charts and the pool. `small`: the orgs whose first start the fairness check follows
    (`metrics.newcomers`); `targets`: each org's turnaround promise in seconds, once `promised`."""

    name: str
    budget: int
    weights: dict[str, int]
    charts: list[SimChart]
    drift: Drift | None = None
    small: tuple[str, ...] = ()
    targets: dict[str, float] = field(default_factory=dict)

    @property
    def mean_duration(self) -> float:
        return sum(chart.kind.mean for chart in self.charts) / len(self.charts)


def _mean_work(budget: int) -> float:
    """Mean unit-seconds of a chart whose kind is drawn uniformly."""
    return sum(kind.mean * min(kind.cost, budget) for kind in KINDS) / len(KINDS)


class _Builder:
    def __init__(self, name: str, budget: int, seed: int) -> None:
        self.name = name
        self.budget = budget
        self.rng = random.Random(seed)
        self.charts: list[SimChart] = []
        self.weights: dict[str, int] = {}

    def org(self, name: str, weight: int = 1) -> str:
        self.weights[name] = weight
        return name

    def add(self, org: str, at: float, kind: Kind | None = None, drift: Drift | None = None) -> None:
        kind = kind or self.rng.choice(KINDS)
        factor = drift.factor if drift and (org, kind.name) == (drift.org, drift.kind) and at >= drift.at else 1.0
        # Lognormal with mean kind.mean x factor: median that x e^(-sigma^2 / 2).
        duration = factor * kind.mean * math.exp(self.rng.gauss(0.0, kind.sigma) - kind.sigma**2 / 2)
        self.charts.append(SimChart(f"c{len(self.charts):06d}", org, kind, at, duration, factor))

    def poisson(
        self,
        orgs: Sequence[str],
        shares: Sequence[float],
        *,
        load: float,
        start: float,
        end: float,
        drift: Drift | None = None,
    ) -> None:
        """Poisson arrivals at `load` of the budget between `start` and `end`, orgs drawn by `shares`
        (load before any drift)."""
        rate = load * self.budget / _mean_work(self.budget)
        at = start + self.rng.expovariate(rate)
        while at < end:
            self.add(self.rng.choices(orgs, shares)[0], at, drift=drift)
            at += self.rng.expovariate(rate)

    def build(self, drift: Drift | None = None, *, small: Sequence[str] = ()) -> Workload:
        self.charts.sort(key=lambda chart: (chart.arrival, chart.id))
        return Workload(self.name, self.budget, self.weights, self.charts, drift, tuple(small))


def steady(*, seed: int = 1, seconds: float = 6000.0, budget: int = 20) -> Workload:
    """Poisson arrivals at load 0.95 from 12 orgs of skewed sizes and weights 1-3."""
    build = _Builder("steady", budget, seed)
    orgs = [build.org(f"org{index:02d}", 1 + index % 3) for index in range(12)]
    build.poisson(orgs, [1.0 / (rank + 1) for rank in range(12)], load=0.95, start=0.0, end=seconds)
    return build.build(small=orgs[-SMALL_ORGS:])


def bursty(*, seed: int = 2, seconds: float = 8000.0, budget: int = 40) -> Workload:
    """Poisson at load 0.6 from 12 orgs, plus bulk uploads of 50-300 charts from one org at a time
    (one of the same orgs or one of 4 bulk-only orgs) of the medium workflow, one at a random moment
    of each stretch of the time 175 of them (the mean bulk) take at 0.4 of the budget: load about 1."""
    build = _Builder("bursty", budget, seed)
    orgs = [build.org(f"org{index:02d}", 1 + index % 3) for index in range(12)]
    bulk_orgs = orgs + [build.org(f"bulk{index}", 1) for index in range(4)]
    build.poisson(orgs, [1.0 / (rank + 1) for rank in range(12)], load=0.6, start=0.0, end=seconds)
    bulk = KINDS[1]  # a backfill of one workflow
    bulk_every = 175 * bulk.mean * min(bulk.cost, budget) / budget / 0.4
    for index in range(int(seconds / bulk_every)):  # one bulk somewhere in each stretch
        at = (index + build.rng.uniform(0.1, 0.9)) * bulk_every
        org = build.rng.choice(bulk_orgs)
        for _ in range(build.rng.randint(50, 300)):
            build.add(org, at, bulk)
    return build.build(small=orgs[-SMALL_ORGS:])


def cold_start(*, seed: int = 3, seconds: float = 3000.0, budget: int = 20) -> Workload:
    """One org's 300-chart backfill at t = 0; ten small orgs, each starting in the first minutes
    (the first at 60 s), then trickling in Poisson, together about 0.6 of the budget."""
    build = _Builder("cold_start", budget, seed)
    backfill = build.org("backfill", 1)
    for _ in range(300):
        build.add(backfill, 0.0, KINDS[1])
    smalls = [build.org(f"small{index}", 1 + index % 2) for index in range(10)]
    for index, small in enumerate(smalls):
        build.poisson([small], [1.0], load=0.06, start=60.0 + 30.0 * index, end=seconds)
    return build.build(small=smalls)


def drift(*, seed: int = 4, seconds: float = 6000.0, budget: int = 20) -> Workload:
    """The steady workload's orgs at load 0.8; halfway through, the busiest org's medium workflow
    (about a tenth of the charts) takes 3x as long, from its charts submitted then on: load about
    0.9 after."""
    build = _Builder("drift", budget, seed)
    orgs = [build.org(f"org{index:02d}", 1 + index % 3) for index in range(12)]
    change = Drift(orgs[0], KINDS[1].name, seconds / 2, 3.0)
    build.poisson(orgs, [1.0 / (rank + 1) for rank in range(12)], load=0.8, start=0.0, end=seconds, drift=change)
    return build.build(change, small=orgs[-SMALL_ORGS:])


WORKLOADS: dict[str, Callable[..., Workload]] = {
    "steady": steady,
    "bursty": bursty,
    "cold_start": cold_start,
    "drift": drift,
}


# -- the schedule ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Moment:
    """The state at a kept instant, before the walk: what waits (in arrival order), what runs
    (chart, start) and each org's policy (its place in the rounds)."""

    at: float
    waiting: tuple[SimChart, ...]
    running: tuple[tuple[SimChart, float], ...]
    orgs: Mapping[str, OrgPolicy]
    enqueue: bool  # the arrival of a chart chosen for the enqueue scores
    sampled: bool  # a sample instant
    halfway: bool = False  # half the wait of a chart chosen for the enqueue scores (`Schedule.halfway`)


@dataclass
class Schedule:
    workload: Workload
    policy: Policy
    start: dict[str, float] = field(default_factory=dict)
    finish: dict[str, float] = field(default_factory=dict)
    moments: list[Moment] = field(default_factory=list)
    due_first: bool = False
    # The instant closest to (arrival + start) / 2 of each chart chosen for the enqueue scores: a
    # moment is kept there (`scored_schedule`).
    halfway: dict[str, float] = field(default_factory=dict)


def simulate(
    workload: Workload,
    *,
    policy: Policy,
    sample_every: float,
    enqueue_every: int,
    due_first: bool = False,
    keep: Mapping[str, float] | None = None,
) -> Schedule:
    """The schedule of `workload` under `policy` (with `due_first`: each org's charts by due time
    inside its share), with the moments kept for the predictors: every `sample_every` seconds, the
    arrival of every `enqueue_every`-th chart (see the module doc), and the instants of `keep`
    (chart id: instant, kept as `Schedule.halfway`). A `keep` instant that is no arrival, finish or
    sample instant is only looked at: no walk there, so the schedule is the one without it."""
    charts = workload.charts
    budget, weights = workload.budget, workload.weights
    queued = {
        chart.id: QueuedChart(chart.id, chart.org, chart.arrival, chart.kind.mean, chart.kind.cost, due=chart.due)
        for chart in charts
    }
    by_id = {chart.id: chart for chart in charts}
    schedule = Schedule(workload, policy, due_first=due_first, halfway=dict(keep or {}))
    kept_at = sorted(set(schedule.halfway.values()))
    next_kept = 0
    served = dict.fromkeys(weights, 0.0)
    waiting: dict[str, SimChart] = {}
    running: dict[str, float] = {}
    finishes: list[tuple[float, str]] = []
    scored = {chart.arrival for chart in charts[::enqueue_every]}
    next_arrival = 0
    next_sample = 0.0
    instant = 0.0
    looking = False  # at a `keep` instant only
    while next_arrival < len(charts) or waiting or finishes:
        while finishes and finishes[0][0] <= instant:
            del running[heapq.heappop(finishes)[1]]
        while next_arrival < len(charts) and charts[next_arrival].arrival <= instant:
            waiting[charts[next_arrival].id] = charts[next_arrival]
            next_arrival += 1
        halfway = next_kept < len(kept_at) and kept_at[next_kept] == instant
        next_kept += halfway
        # The live shell's rule (`scheduling.core.service`): no caps or pauses here, so every backlogged
        # org can start now; idle orgs are raised to the round under way.
        backlogged = {chart.org for chart in waiting.values()}
        orgs, round_under_way = fair_service(
            {org: OrgService(weight, None, served[org]) for org, weight in weights.items()},
            ready=backlogged,
            backlogged=backlogged,
            policy=policy,
            quantum=1.0,
        )
        sampled = not looking and instant >= next_sample
        if (sampled or instant in scored or halfway) and (waiting or running):
            schedule.moments.append(
                Moment(
                    instant,
                    tuple(waiting.values()),
                    tuple((by_id[chart_id], started) for chart_id, started in running.items()),
                    orgs,
                    instant in scored,
                    sampled,
                    halfway,
                )
            )
        if not looking:
            if round_under_way is not None:
                served = {org: max(time, round_under_way) for org, time in served.items()}
            if sampled:
                next_sample += sample_every
            scenario = Scenario(
                now=instant,
                budget=budget,
                policy=policy,
                orgs=orgs,
                queued=[queued[chart_id] for chart_id in waiting],
                due_first=due_first,
            )
            in_flight = [
                RunningChart(i, by_id[i].org, s, by_id[i].kind.mean, by_id[i].kind.cost) for i, s in running.items()
            ]
            for started in dispatch_walk(
                fair_order(scenario), now=instant, budget=budget, running=in_flight, orgs=orgs
            ):
                chart = waiting.pop(str(started.id))
                running[chart.id] = instant
                schedule.start[chart.id] = instant
                schedule.finish[chart.id] = instant + chart.duration
                heapq.heappush(finishes, (instant + chart.duration, chart.id))
                served[chart.org] += start_service(
                    weight=weights[chart.org], cost=chart.kind.cost, policy=policy, quantum=1.0
                )
        ahead = [math.inf]
        if finishes:
            ahead.append(finishes[0][0])
        if next_arrival < len(charts):
            ahead.append(charts[next_arrival].arrival)
        if waiting or next_arrival < len(charts):
            ahead.append(next_sample)
        upcoming = kept_at[next_kept] if next_kept < len(kept_at) else math.inf
        looking = upcoming < min(ahead)
        instant = min(*ahead, upcoming)
        if instant == math.inf:
            break
    return schedule


def scored_schedule(
    workload: Workload, *, policy: Policy, sample_every: float, enqueue_every: int, due_first: bool = False
) -> Schedule:
    """The schedule of `simulate`, with a moment kept at half the wait of every chart chosen for the
    enqueue scores (the charts arriving at the instants of every `enqueue_every`-th chart): the
    instant (arrival + start) / 2 of the schedule, which the kept instants leave as it was."""
    plain = simulate(
        workload, policy=policy, sample_every=sample_every, enqueue_every=enqueue_every, due_first=due_first
    )
    chosen = {chart.arrival for chart in workload.charts[::enqueue_every]}
    halfway = {c.id: (c.arrival + plain.start[c.id]) / 2 for c in workload.charts if c.arrival in chosen}
    return simulate(
        workload,
        policy=policy,
        sample_every=sample_every,
        enqueue_every=enqueue_every,
        due_first=due_first,
        keep=halfway,
    )


# -- the predictors ----------------------------------------------------------------------------------


@dataclass
class Prediction:
    """ETAs (and bands, where the predictor gives them) of the charts waiting and running at a
    moment, and each org's clear-time (of its waiting and running charts)."""

    eta: dict[str, float]
    low: dict[str, float] | None = None
    high: dict[str, float] | None = None
    org_clear: dict[str, float] = field(default_factory=dict)
    org_clear_band: dict[str, tuple[float, float]] | None = None
    # Each chart's chance of finishing after its due time (the plan's `late_chance`), where known.
    late: dict[str, float] = field(default_factory=dict)


def true_durations(chart: SimChart) -> tuple[float, float]:
    """(mean, log-sigma) of a chart's duration as they truly are."""
    return chart.mean, chart.kind.sigma


@dataclass
class _Sums:
    """Pooled sums of some pairs' states, as the snapshot pools its rows (`snapshot._Sums`)."""

    count: float = 0.0
    total: float = 0.0
    sum_log: float = 0.0
    sum_log_sq: float = 0.0

    def add(self, state: DurationState) -> None:
        self.count += state.count
        self.total += state.count * state.mean_seconds
        self.sum_log += state.count * state.mean_log
        self.sum_log_sq += state.count * (state.var_log + state.mean_log * state.mean_log)

    def spread(self) -> float | None:
        if self.count < 2:
            return None
        mean_log = self.sum_log / self.count
        return math.sqrt(max(0.0, self.sum_log_sq / self.count - mean_log * mean_log))


@dataclass
class Learned:
    """The durations as the live system learns them from finished runs.

    1. `learn`: each (org, kind) pair's state by the core's `duration_learn`, fed each run as it
       finishes (with its start); while the pair has fewer than WARMUP_RUNS runs, with its workflow's usual
       log-duration over every org (once that has WARMUP_RUNS), as `reconcile.duration_record`.
    2. `in_flight`: the runs going at the moment, as the snapshot reads them: a pair's estimate
       counts its runs in flight as runs longer than they have lasted (`duration_censored`).
    3. `of`: the snapshot's fallbacks (`snapshot.Durations.of`): the pair's estimate, else its
       workflow's runs pooled over every org, else its org's, else DEFAULT_DURATION; a spread
       unknown (under two runs) is the one pooled over every pair, else DEFAULT_SPREAD.
    """

    pairs: dict[tuple[str, str], DurationState] = field(default_factory=dict)
    _known: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    _lasted: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def learn(self, chart: SimChart, seconds: float, *, started: float | None = None) -> None:
        key = (chart.org, chart.kind.name)
        state = self.pairs.get(key, DurationState())
        usual = None
        if state.count < WARMUP_RUNS:
            workflow = self._pooled(lambda pair: pair[1] == chart.kind.name)
            if workflow.count >= WARMUP_RUNS:
                usual = (workflow.sum_log / workflow.count, workflow.spread() or 0.0)
        self.pairs[key] = duration_learn(state, seconds, usual=usual, started=started)
        self._known.clear()

    def in_flight(self, running: Sequence[tuple[SimChart, float]], *, now: float) -> None:
        """The runs going at `now` (chart, start), for the estimates from then on."""
        lasted: dict[tuple[str, str], list[float]] = defaultdict(list)
        for chart, started in running:
            lasted[(chart.org, chart.kind.name)].append(now - started)
        if lasted != self._lasted:
            self._lasted = dict(lasted)
            self._known.clear()

    def of(self, chart: SimChart) -> tuple[float, float]:
        """(mean, log-sigma) that the live snapshot would give the chart now."""
        key = (chart.org, chart.kind.name)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = self._estimate(key)
        return known

    def _estimate(self, key: tuple[str, str]) -> tuple[float, float]:
        unknown = self._pooled(lambda _: True).spread()
        unknown_spread = DEFAULT_SPREAD if unknown is None else unknown
        state = self.pairs.get(key)
        if state is not None and state.count:
            state = duration_censored(state, self._lasted.get(key, []), spread=unknown_spread)
            sigma = predictive_sigma(state)
            return state.mean_seconds, unknown_spread if sigma is None else sigma
        for level in (self._pooled(lambda pair: pair[1] == key[1]), self._pooled(lambda pair: pair[0] == key[0])):
            if level.count:
                spread = level.spread()
                return level.total / level.count, unknown_spread if spread is None else spread
        return DEFAULT_DURATION, unknown_spread

    def _pooled(self, chosen: Callable[[tuple[str, str]], bool]) -> _Sums:
        sums = _Sums()
        for pair, state in self.pairs.items():
            if state.count and chosen(pair):
                sums.add(state)
        return sums


DURATIONS = ("true", "learned")


@dataclass(frozen=True)
class Context:
    """What a predictor may know at a moment: the past, and (for the floor only) the future.
    `durations`: the (mean, log-sigma) the predictors are given (`true_durations` or `Learned.of`);
    the floor is always told the truth."""

    schedule: Schedule
    moment: Moment
    arrived: Sequence[SimChart]  # every chart that arrived up to the moment, in arrival order
    ended: Sequence[tuple[float, float, float]]  # (start, finish, duration) of the runs ended by then
    future: Sequence[SimChart]  # the charts still to arrive (the floor's knowledge)
    arrival_times: Sequence[float]  # of `arrived`
    durations: Callable[[SimChart], tuple[float, float]] = true_durations


def _scenario(context: Context, *, truth: bool = False, **extensions: object) -> Scenario:
    moment, workload = context.moment, context.schedule.workload
    known = true_durations if truth else context.durations
    queued = [(c, *known(c)) for c in moment.waiting]
    running = [(c, started, *known(c)) for c, started in moment.running]
    return Scenario(
        now=moment.at,
        budget=workload.budget,
        policy=context.schedule.policy,
        orgs=moment.orgs,
        queued=[QueuedChart(c.id, c.org, c.arrival, mean, c.kind.cost, due=c.due) for c, mean, _ in queued],
        running=[RunningChart(c.id, c.org, started, mean, c.kind.cost, due=c.due) for c, started, mean, _ in running],
        spread=[sigma for *_, sigma in queued],
        running_spread=[sigma for *_, sigma in running],
        due_first=context.schedule.due_first,
        **extensions,  # type: ignore[arg-type]
    )


def _running_etas(context: Context) -> dict[str, float]:
    """What a user of another scheduler expects of a running chart: its start plus its mean, or now."""
    now = context.moment.at
    return {c.id: max(now, started + context.durations(c)[0]) for c, started in context.moment.running}


def _from_plan(result: Plan, context: Context) -> Prediction:
    ids = [chart.id for chart in context.moment.waiting] + [chart.id for chart, _ in context.moment.running]
    eta = {chart_id: result.eta[chart_id] for chart_id in ids}
    low = {chart_id: result.eta_low[chart_id] for chart_id in ids}
    high = {chart_id: result.eta_high[chart_id] for chart_id in ids}
    late = {chart_id: result.late_chance[chart_id] for chart_id in ids}
    return Prediction(
        {k: v for k, v in eta.items() if v is not None},
        {k: v for k, v in low.items() if v is not None},
        {k: v for k, v in high.items() if v is not None},
        {org: clear for org, clear in result.org_clear.items() if clear is not None},
        {
            org: (clear_low, clear_high)
            for org, clear_low in result.org_clear_low.items()
            if clear_low is not None and (clear_high := result.org_clear_high[org]) is not None
        },
        {k: v for k, v in late.items() if v is not None},
    )


def fairsched(context: Context) -> Prediction:
    """The project's ETAs: the plan from the submissions of the last HISTORY_DECAYS arrival windows
    (`Scenario.history`, decaying by e every window), as the live snapshot passes them."""
    since = max(0.0, context.moment.at - HISTORY_DECAYS * ARRIVAL_WINDOW)
    submissions = [
        PastSubmission(org=c.org, created=c.arrival, avg=avg, cost=c.kind.cost, spread=spread)
        for c in context.arrived[bisect.bisect_left(context.arrival_times, since) :]
        for avg, spread in (context.durations(c),)
    ]
    history = History(submissions, since=since, decay=ARRIVAL_WINDOW)
    return _from_plan(plan(_scenario(context, history=history)), context)


def one_window(context: Context) -> Prediction:
    """Before `Scenario.history`: as many charts of each (org, kind) over the next arrival window
    as over the last one, evenly spread (the shell's `expected_arrivals` until this issue)."""
    now = context.moment.at
    counts: dict[tuple[str, Kind], int] = defaultdict(int)
    latest: dict[tuple[str, Kind], SimChart] = {}
    for chart in reversed(context.arrived):
        if chart.arrival < now - ARRIVAL_WINDOW:
            break
        counts[(chart.org, chart.kind)] += 1
        latest.setdefault((chart.org, chart.kind), chart)
    arrivals = [
        Arrival(org, count / ARRIVAL_WINDOW, now + ARRIVAL_WINDOW, avg, kind.cost, spread)
        for (org, kind), count in counts.items()
        for avg, spread in (context.durations(latest[(org, kind)]),)
    ]
    return _from_plan(plan(_scenario(context, arrivals=arrivals)), context)


def floor(context: Context) -> Prediction:
    """Told every chart that will arrive (at its arrival time, with its true mean duration): the
    plan misses only the durations' own spread. Charts arriving after the last waiting chart's
    actual finish cannot touch any of them and are left out. The running charts keep their true
    spread: their ETAs are their expected finish given how long they have run. A waiting chart's
    late chance is its own duration's true tail after its planned start (the start's own spread,
    from the draws of the runs ahead, is what it cannot know: `tools.loadtest.miss_limit`)."""
    schedule, moment = context.schedule, context.moment
    last = max((schedule.finish[chart.id] for chart in moment.waiting), default=moment.at)
    coming = [
        QueuedChart(c.id, c.org, c.arrival, c.mean, c.kind.cost, available_at=c.arrival, due=c.due)
        for c in context.future
        if c.arrival < last
    ]
    scenario = _scenario(context, truth=True)
    result = plan(replace(scenario, queued=[*scenario.queued, *coming], spread=()))
    prediction = _from_plan(result, context)
    prediction.low = prediction.high = prediction.org_clear_band = None
    # Its late chance: the chart's own duration law after its start, not the plan's step at the
    # start + mean (its queued charts have no spread, so that the ETAs stay the means).
    for chart in moment.waiting:
        started = result.start[chart.id]
        if chart.due is not None and started is not None:
            prediction.late[chart.id] = 1.0 if chart.due < moment.at else _longer_than(chart, chart.due - started)
    # The plan's clear-times count the future charts too: only those present count, by fairsched's
    # rule (the median last finish, never before the latest ETA).
    present = [*((c, result.start[c.id]) for c in moment.waiting), *moment.running]
    orgs = sorted({chart.org for chart, _ in present})
    code = {org: index for index, org in enumerate(orgs)}
    last = median_last_finish(
        now=moment.at,
        org=[code[chart.org] for chart, _ in present],
        start=[started for _, started in present],
        avg=[chart.mean for chart, _ in present],
        spread=[chart.kind.sigma for chart, _ in present],
        org_count=len(orgs),
        lasted=[0.0] * len(moment.waiting) + [moment.at - started for _, started in moment.running],
    ).tolist()
    latest = dict.fromkeys(orgs, moment.at)
    for chart, _ in present:
        eta = result.eta[chart.id]
        latest[chart.org] = max(latest[chart.org], moment.at if eta is None else eta)
    prediction.org_clear = {
        org: latest[org] if math.isnan(last[code[org]]) else max(latest[org], last[code[org]]) for org in orgs
    }
    return prediction


def _longer_than(chart: SimChart, seconds: float) -> float:
    """The chance that the chart's run takes longer than `seconds`, under its true lognormal law."""
    if seconds <= 0:
        return 1.0
    sigma = chart.kind.sigma
    return math.erfc((math.log(seconds / chart.mean) + sigma * sigma / 2) / sigma / math.sqrt(2)) / 2


def _mean_run(context: Context) -> float:
    """The mean of the runs ended so far (the configured default, 60 s, before any)."""
    ended = context.ended
    return sum(duration for _, _, duration in ended) / len(ended) if ended else 60.0


def naive(context: Context) -> Prediction:
    """pending cost units x mean finished run / budget, for every chart alike."""
    moment, budget = context.moment, context.schedule.workload.budget
    pending = sum(min(c.kind.cost, budget) for c in moment.waiting)
    pending += sum(min(c.kind.cost, budget) for c, _ in moment.running)
    eta = moment.at + pending * _mean_run(context) / budget
    orgs = {c.org for c in moment.waiting} | {c.org for c, _ in moment.running}
    etas = {chart.id: eta for chart in moment.waiting} | _running_etas(context)
    return Prediction(etas, org_clear=dict.fromkeys(orgs, eta))


def queue_depth(context: Context) -> Prediction:
    """What a Kueue user computes: the chart starts after the charts ahead of it in the queue
    (the fair order) have drained at the recent rate of starts (over the last arrival window, or
    since the first start), and finishes its mean duration later."""
    moment, schedule = context.moment, context.schedule
    budget = schedule.workload.budget
    now = moment.at
    recent = [start for start, _, _ in context.ended if start >= now - ARRIVAL_WINDOW]
    recent += [started for _, started in moment.running if started >= now - ARRIVAL_WINDOW]
    span = min(ARRIVAL_WINDOW, now - min(recent)) if recent else 0.0
    drain = len(recent) / span if span > 0 and len(recent) > 1 else budget / _mean_run(context)
    scenario = _scenario(context)
    eta = {str(chart.id): now + ahead / drain + chart.avg for ahead, chart in enumerate(fair_order(scenario))}
    org_clear: dict[str, float] = {}
    for chart in moment.waiting:
        org_clear[chart.org] = max(org_clear.get(chart.org, now), eta[chart.id])
    running = _running_etas(context)
    for chart, _ in moment.running:
        org_clear[chart.org] = max(org_clear.get(chart.org, now), running[chart.id])
    return Prediction(eta | running, org_clear=org_clear)


PREDICTORS: dict[str, Callable[[Context], Prediction]] = {
    "fairsched": fairsched,
    "fairsched, one window (before)": one_window,
    "floor: told every arrival": floor,
    "naive: pending x avg / capacity": naive,
    "queue depth ahead / drain rate": queue_depth,
}
BANDED = ("fairsched", "fairsched, one window (before)")


# -- the scores --------------------------------------------------------------------------------------


# A chart is predicted to miss its promise when its late chance is at least this (the scheduler's
# default `at_risk_threshold`).
AT_RISK = 0.5
# The predictors whose late chances are scored (at the half-wait moments, only these are asked).
MISS_PREDICTORS = ("fairsched", "floor: told every arrival")


@dataclass(frozen=True)
class MissFigures:
    """Predictions "will miss" (late chance >= AT_RISK) of some charts, against what happened: the
    chart `missed` when it finished after its due time."""

    charts: int = 0
    missed: int = 0
    predicted: int = 0
    hits: int = 0  # predicted to miss, and missed

    @property
    def precision(self) -> float | None:
        return self.hits / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.hits / self.missed if self.missed else None

    def add(self, *, chance: float, missed: bool) -> MissFigures:
        predicted = chance >= AT_RISK
        return MissFigures(
            self.charts + 1, self.missed + missed, self.predicted + predicted, self.hits + (predicted and missed)
        )


@dataclass
class Scores:
    """One predictor's figures on one schedule (errors: see `metrics.error_figures`)."""

    enqueue: ErrorFigures
    enqueue_deep: ErrorFigures
    enqueue_shallow: ErrorFigures
    sampled: ErrorFigures
    sampled_deep: ErrorFigures
    sampled_shallow: ErrorFigures
    org_clear: ErrorFigures
    sampled_running: ErrorFigures = field(default_factory=lambda: error_figures([]))
    drift_before: ErrorFigures = field(default_factory=lambda: error_figures([]))
    drift_after: ErrorFigures = field(default_factory=lambda: error_figures([]))
    band_enqueue: float | None = None
    band_sampled: float | None = None
    band_running: float | None = None
    band_clear: float | None = None
    width_enqueue: float | None = None
    width_sampled: float | None = None
    width_running: float | None = None
    miss_enqueue: MissFigures = field(default_factory=MissFigures)
    miss_halfway: MissFigures = field(default_factory=MissFigures)


@dataclass
class _Tally:
    signed: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    inside: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    width: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    misses: dict[str, MissFigures] = field(default_factory=lambda: defaultdict(MissFigures))

    def scores(self) -> Scores:
        def share(flags: list[bool]) -> float | None:
            return sum(flags) / len(flags) if flags else None

        errors = {key: error_figures(values) for key, values in self.signed.items()}
        empty = error_figures([])
        return Scores(
            enqueue=errors.get("enqueue", empty),
            enqueue_deep=errors.get("enqueue deep", empty),
            enqueue_shallow=errors.get("enqueue shallow", empty),
            sampled=errors.get("sampled", empty),
            sampled_deep=errors.get("sampled deep", empty),
            sampled_shallow=errors.get("sampled shallow", empty),
            org_clear=errors.get("org clear", empty),
            sampled_running=errors.get("sampled running", empty),
            drift_before=errors.get("drift before", empty),
            drift_after=errors.get("drift after", empty),
            band_enqueue=share(self.inside["enqueue"]),
            band_sampled=share(self.inside["sampled"]),
            band_running=share(self.inside["sampled running"]),
            band_clear=share(self.inside["org clear"]),
            width_enqueue=quantile(self.width["enqueue"], 0.5),
            width_sampled=quantile(self.width["sampled"], 0.5),
            width_running=quantile(self.width["sampled running"], 0.5),
            miss_enqueue=self.misses["enqueue"],
            miss_halfway=self.misses["half wait"],
        )

    def add(
        self, places: Sequence[str], error: float, band: tuple[float, float] | None, left: float, finish: float
    ) -> None:
        """One ETA's error in each of `places`, and whether its band held the finish, its width
        relative to the time `left`."""
        for place in places:
            self.signed[place].append(error)
            if band is not None:
                self.inside[place].append(band[0] <= finish <= band[1])
                self.width[place].append((band[1] - band[0]) / left)


def contexts(schedule: Schedule, *, durations: str = "true") -> Iterator[Context]:
    """What the predictors know at each kept moment of `schedule`, in time order (step 1 of `score`):
    the charts arrived and the runs ended by then, and the `durations` they are given ("learned":
    `Learned` fed every run finished by the moment, in finish order, and the runs in flight)."""
    charts = schedule.workload.charts
    by_finish = sorted(charts, key=lambda c: schedule.finish[c.id])
    ends = [(schedule.start[c.id], schedule.finish[c.id], c.duration) for c in by_finish]
    finish_times = [run[1] for run in ends]
    arrival_times = [chart.arrival for chart in charts]
    learned = Learned()
    known = learned.of if durations == "learned" else true_durations
    arrived = learnt = 0
    for moment in schedule.moments:
        at = moment.at
        while arrived < len(charts) and charts[arrived].arrival <= at:
            arrived += 1
        finished = bisect.bisect_right(finish_times, at)
        for chart in by_finish[learnt:finished]:
            learned.learn(chart, chart.duration, started=schedule.start[chart.id])
        learnt = finished
        learned.in_flight(moment.running, now=at)
        yield Context(
            schedule, moment, charts[:arrived], ends[:finished], charts[arrived:], arrival_times[:arrived], known
        )


def score(
    schedule: Schedule, predictors: Mapping[str, Callable[[Context], Prediction]], *, durations: str = "true"
) -> dict[str, Scores]:
    """Each predictor's scores on `schedule` (see the module doc, step 4), given `durations`
    ("true": each chart's true mean and spread; "learned": as the live system learns them).

    1. At each kept moment, each predictor predicts the charts waiting and running then; learned
       durations have been fed every run finished by the moment, in finish order.
    2. A chart's error at the moment: (ETA - finish) / (finish - moment); at enqueue only at the
       moment of its own arrival (when it was chosen for that), sampled at every sample instant
       it waits or runs through (a running chart's also apart). Deep: its wait (start - arrival)
       was at least 5 mean durations. A band's width is relative to the time left.
    3. An org's clear-time (the latest actual finish of the charts it had waiting or running at a
       sample instant after the first arrival window) against the predicted one.
    4. On a drift, the sampled errors of the moments before the change (after the first arrival
       window) and of those after the changed workflow's DRIFT_RUNS-th run since has finished.
    5. The late chances of MISS_PREDICTORS, of the charts with a due time chosen for the enqueue
       scores: at their arrival and at half their wait (`Schedule.halfway`), "will miss" against
       finishing after the due time (`MissFigures`).
    """
    deep_wait = DEEP_WAITS * schedule.workload.mean_duration
    before, after = _drift_window(schedule)
    tallies = {name: _Tally() for name in predictors}
    for context in contexts(schedule, durations=durations):
        moment = context.moment
        at, sampled = moment.at, moment.sampled
        drifting = ["drift before"] if before <= at < after[0] else ["drift after"] if at >= after[1] else []
        for name, predict in predictors.items():
            if not (moment.sampled or moment.enqueue) and name not in MISS_PREDICTORS:
                continue  # a half-wait moment only
            prediction = predict(context)
            tally = tallies[name]
            if name in MISS_PREDICTORS:
                _score_misses(tally, schedule, moment, prediction)
            banded = prediction.low is not None and prediction.high is not None
            for chart in moment.waiting:
                eta = prediction.eta.get(chart.id)
                finish = schedule.finish[chart.id]
                if eta is None or finish <= at:
                    continue
                depth = "deep" if schedule.start[chart.id] - chart.arrival >= deep_wait else "shallow"
                places = []
                if moment.enqueue and chart.arrival == at:
                    places += ["enqueue", f"enqueue {depth}"]
                if sampled:
                    places += ["sampled", f"sampled {depth}", *drifting]
                band = (prediction.low[chart.id], prediction.high[chart.id]) if banded else None  # type: ignore[index]
                tally.add(places, (eta - finish) / (finish - at), band, finish - at, finish)
            if sampled:
                for chart, _ in moment.running:
                    eta = prediction.eta.get(chart.id)
                    finish = schedule.finish[chart.id]
                    if eta is None or finish <= at:
                        continue
                    band = (prediction.low[chart.id], prediction.high[chart.id]) if banded else None  # type: ignore[index]
                    tally.add(
                        ["sampled", "sampled running", *drifting],
                        (eta - finish) / (finish - at),
                        band,
                        finish - at,
                        finish,
                    )
            if sampled and at >= CLEAR_AFTER:
                _score_clear(tally, schedule, moment, prediction)
    return {name: tally.scores() for name, tally in tallies.items()}


def _score_misses(tally: _Tally, schedule: Schedule, moment: Moment, prediction: Prediction) -> None:
    for chart in moment.waiting:
        chance = prediction.late.get(chart.id)
        if chance is None or chart.due is None:
            continue
        missed = schedule.finish[chart.id] > chart.due
        if moment.enqueue and chart.arrival == moment.at:
            tally.misses["enqueue"] = tally.misses["enqueue"].add(chance=chance, missed=missed)
        if moment.halfway and schedule.halfway.get(chart.id) == moment.at:
            tally.misses["half wait"] = tally.misses["half wait"].add(chance=chance, missed=missed)


def _drift_window(schedule: Schedule) -> tuple[float, tuple[float, float]]:
    """The drift target's moments: from CLEAR_AFTER to the change (before), and from the finish of
    the changed workflow's DRIFT_RUNS-th changed run on (after); none without a drift."""
    drift = schedule.workload.drift
    if drift is None:
        return math.inf, (math.inf, math.inf)
    changed = sorted(schedule.finish[c.id] for c in schedule.workload.charts if c.factor != 1.0)
    recovered = changed[DRIFT_RUNS - 1] if len(changed) >= DRIFT_RUNS else math.inf
    return CLEAR_AFTER, (drift.at, recovered)


def _score_clear(tally: _Tally, schedule: Schedule, moment: Moment, prediction: Prediction) -> None:
    actual: dict[str, float] = {}
    for chart in moment.waiting:
        actual[chart.org] = max(actual.get(chart.org, 0.0), schedule.finish[chart.id])
    for chart, _ in moment.running:
        if chart.org in actual:
            actual[chart.org] = max(actual[chart.org], schedule.finish[chart.id])
    for org, finish in actual.items():
        predicted = prediction.org_clear.get(org)
        if predicted is not None and finish > moment.at:
            tally.signed["org clear"].append((predicted - finish) / (finish - moment.at))
            band = None if prediction.org_clear_band is None else prediction.org_clear_band.get(org)
            if band is not None:
                tally.inside["org clear"].append(band[0] <= finish <= band[1])


# -- the run and its table ---------------------------------------------------------------------------


@dataclass
class Result:
    workload: str
    policy: Policy
    charts: int
    deep_share: float
    scores: dict[str, Scores]
    durations: str = "true"


POLICIES: tuple[Policy, ...] = ("round_robin", "deficit")


# -- promises and the due-first order ----------------------------------------------------------------


# Each org's turnaround target is the turnaround this share of its charts reach under the plain fair
# order (round robin): from the first share for the first org to the second for the last, so that
# 10-30% of each org's charts miss.
MET_SHARES = (0.7, 0.9)
# Each chart's own promise is its org's target times a factor drawn uniformly in this range.
PROMISE_FACTORS = (0.5, 1.5)
# Targets are whole multiples of this many seconds.
TARGET_STEP = 10.0
# The fairness check's saturated windows are this many mean durations long (metrics.saturated_windows).
FAIRNESS_WINDOW = 5.0


def promised(workload: Workload, *, sample_every: float, enqueue_every: int, seed: int = 0) -> Workload:
    """`workload` with a turnaround target per org, and each chart due at its arrival plus its own
    promise: its org's target x a factor drawn uniformly in PROMISE_FACTORS (from `seed`), as if
    each chart were submitted with its own `due_at`.

    1. Each chart's factor f; the plain fair order's schedule (round robin, sampled as the scores
       sample it). A chart misses when its turnaround (finish - arrival) > f x target, that is when
       turnaround / f > target.
    2. Each org's target: the least turnaround / f that its share of MET_SHARES (evenly from the
       first org's to the last's) of its charts reach, rounded up to TARGET_STEP.
    3. Each chart's due time: its arrival + f x its org's target.
    """
    rng = random.Random(f"{workload.name}/{seed}")
    factor = {chart.id: rng.uniform(*PROMISE_FACTORS) for chart in workload.charts}
    plain = simulate(workload, policy="round_robin", sample_every=sample_every, enqueue_every=enqueue_every)
    stretched: dict[str, list[float]] = defaultdict(list)
    for chart in workload.charts:
        stretched[chart.org].append((plain.finish[chart.id] - chart.arrival) / factor[chart.id])
    orgs = [org for org in workload.weights if stretched[org]]
    low, high = MET_SHARES
    targets = {}
    for index, org in enumerate(orgs):
        share = low + (high - low) * index / max(1, len(orgs) - 1)
        reached = sorted(stretched[org])[math.ceil(share * len(stretched[org]) - 1e-9) - 1]
        targets[org] = TARGET_STEP * max(1, math.ceil(reached / TARGET_STEP))
    charts = [replace(chart, due=chart.arrival + factor[chart.id] * targets[chart.org]) for chart in workload.charts]
    return replace(workload, charts=charts, targets=targets)


def _promised_workload(name: str, *, scale: float, seed: int | None) -> tuple[Workload, float, int]:
    """The workload `name` (another draw with `seed`) with its promises, and how it is sampled (every
    mean duration / `scale`; enqueue scores on every 4 / `scale`-th chart)."""
    workload = WORKLOADS[name]() if seed is None else WORKLOADS[name](seed=seed)
    sample_every, enqueue_every = workload.mean_duration / scale, max(1, round(4 / scale))
    promises = promised(workload, sample_every=sample_every, enqueue_every=enqueue_every, seed=seed or 0)
    return promises, sample_every, enqueue_every


def attainment(schedule: Schedule) -> dict[str, float]:
    """The share of each org's charts with a due time that finished by it."""
    met: dict[str, list[bool]] = defaultdict(list)
    for chart in schedule.workload.charts:
        if chart.due is not None:
            met[chart.org].append(schedule.finish[chart.id] <= chart.due)
    return {org: sum(flags) / len(flags) for org, flags in met.items()}


def overall_attainment(schedule: Schedule) -> float | None:
    """The share of all charts with a due time that finished by it."""
    flags = [schedule.finish[c.id] <= c.due for c in schedule.workload.charts if c.due is not None]
    return sum(flags) / len(flags) if flags else None


def fairness_of(schedule: Schedule) -> metrics.Fairness:
    """The load report's fairness figures (`metrics.fairness`) of a simulated schedule: windows of
    FAIRNESS_WINDOW mean durations, the workload's small orgs followed as newcomers."""
    workload = schedule.workload
    charts = [
        metrics.ChartRun(c.id, c.org, c.arrival, c.arrival, schedule.start[c.id], schedule.finish[c.id], c.kind.cost)
        for c in workload.charts
    ]
    kinds = dict.fromkeys(workload.small, "small")
    order = "due first" if schedule.due_first else "fair order"
    return metrics.fairness(
        metrics.Schedule(order, charts, workload.budget, workload.weights, kinds),
        window=FAIRNESS_WINDOW * workload.mean_duration,
    )


@dataclass
class OrderResult:
    """One workload under one policy, in the plain fair order or due first: each org's attainment
    (`attainment`), the overall one and the fairness figures (`fairness_of`)."""

    workload: str
    policy: Policy
    due_first: bool
    weights: dict[str, int]
    targets: dict[str, float]
    attainment: dict[str, float]
    overall: float | None
    fairness: metrics.Fairness


def orders_run(
    workloads: Sequence[str] = tuple(WORKLOADS),
    policies: Sequence[Policy] = POLICIES,
    *,
    scale: float = 1.0,
    seed: int | None = None,
) -> list[OrderResult]:
    """Every workload (with its promises, `promised`) under every policy, in the plain fair order and
    due first."""
    results = []
    for name in workloads:
        workload, sample_every, enqueue_every = _promised_workload(name, scale=scale, seed=seed)
        for policy in policies:
            for due_first in (False, True):
                schedule = simulate(
                    workload,
                    policy=policy,
                    due_first=due_first,
                    sample_every=sample_every,
                    enqueue_every=enqueue_every,
                )
                results.append(
                    OrderResult(
                        name,
                        policy,
                        due_first,
                        workload.weights,
                        workload.targets,
                        attainment(schedule),
                        overall_attainment(schedule),
                        fairness_of(schedule),
                    )
                )
    return results


def run(
    workloads: Sequence[str] = tuple(WORKLOADS),
    policies: Sequence[Policy] = POLICIES,
    *,
    predictors: Mapping[str, Callable[[Context], Prediction]] = PREDICTORS,
    scale: float = 1.0,
    seed: int | None = None,
    durations: Sequence[str] = ("true",),
) -> list[Result]:
    """Every workload under every policy, scored by every predictor given each of `durations`
    (`DURATIONS`: true, learned; one schedule serves both). `scale` < 1 samples more
    sparsely (for a quick look): enqueue scores on every 4th / scale chart, samples every mean
    duration / scale. `seed`: another draw of every workload (each has its own by default); one
    draw's figures swing widely (the steady workload's sampled median from 1.0x to 1.6x the floor's
    over three seeds), so a change is judged on several."""
    results = []
    for name in workloads:
        workload, sample_every, enqueue_every = _promised_workload(name, scale=scale, seed=seed)
        for policy in policies:
            schedule = scored_schedule(workload, policy=policy, sample_every=sample_every, enqueue_every=enqueue_every)
            deep = DEEP_WAITS * workload.mean_duration
            waits = [schedule.start[c.id] - c.arrival for c in workload.charts]
            for known in durations:
                results.append(
                    Result(
                        name,
                        policy,
                        len(workload.charts),
                        sum(w >= deep for w in waits) / len(waits),
                        score(schedule, predictors, durations=known),
                        known,
                    )
                )
    return results


def _figure(errors: ErrorFigures) -> str:
    if errors.median is None:
        return "-"
    return f"{errors.median:.2f} / {errors.p90:.2f} / {errors.bias:+.2f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


TABLE_HEADER = [
    "workload",
    "policy",
    "durations",
    "predictor",
    "at enqueue",
    "enqueue deep",
    "enqueue shallow",
    "sampled",
    "sampled deep",
    "sampled shallow",
    "org clear",
    "sampled running",
    "band enqueue (width)",
    "band sampled (width)",
    "band running (width)",
]


def table_rows(results: Sequence[Result]) -> list[list[str]]:
    """One row per (workload, policy, predictor); errors as median / p90 / signed bias."""
    rows = []
    for result in results:
        for name, scores in result.scores.items():
            rows.append(
                [
                    result.workload,
                    result.policy,
                    result.durations,
                    name,
                    *(_figure(getattr(scores, key)) for key in ("enqueue", "enqueue_deep", "enqueue_shallow")),
                    *(_figure(getattr(scores, key)) for key in ("sampled", "sampled_deep", "sampled_shallow")),
                    _figure(scores.org_clear),
                    _figure(scores.sampled_running),
                    f"{_share(scores.band_enqueue)} ({_width(scores.width_enqueue)})",
                    f"{_share(scores.band_sampled)} ({_width(scores.width_sampled)})",
                    f"{_share(scores.band_running)} ({_width(scores.width_running)})",
                ]
            )
    return [row if row[-1] != "- (-)" else [*row[:-3], "-", "-", "-"] for row in rows]


def _width(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


MISS_HEADER = [
    "workload",
    "policy",
    "durations",
    "predictor",
    "charts (missed)",
    "at enqueue: precision / recall (predicted)",
    "at half wait: precision / recall (predicted)",
]


def _miss(figures: MissFigures) -> str:
    return f"{_share(figures.precision)} / {_share(figures.recall)} ({figures.predicted})"


def miss_rows(results: Sequence[Result]) -> list[list[str]]:
    """One row per (workload, policy, durations) and predictor of MISS_PREDICTORS: "will miss" scored
    at enqueue and at half the wait, on the same charts."""
    return [
        [
            result.workload,
            result.policy,
            result.durations,
            name,
            f"{scores.miss_halfway.charts} ({_share(scores.miss_halfway.missed / scores.miss_halfway.charts)})"
            if scores.miss_halfway.charts
            else "-",
            _miss(scores.miss_enqueue),
            _miss(scores.miss_halfway),
        ]
        for result in results
        for name, scores in result.scores.items()
        if name in MISS_PREDICTORS
    ]


ORDER_HEADER = [
    "workload",
    "policy",
    "order",
    "attainment",
    "orgs' attainment min / median",
    "Jain (units taken) mean / min (windows)",
    "small orgs' first start within one round",
]


def order_rows(results: Sequence[OrderResult]) -> list[list[str]]:
    """One row per (workload, policy, order): attainment overall and across orgs, and fairness."""
    rows = []
    for result in results:
        shares = list(result.attainment.values())
        fair = result.fairness
        rows.append(
            [
                result.workload,
                result.policy,
                "due first" if result.due_first else "fair order",
                _share(result.overall),
                f"{_share(min(shares, default=None))} / {_share(quantile(shares, 0.5))}",
                f"{_num(fair.jain_mean)} / {_num(min(fair.jain_values, default=None))} ({len(fair.jain_values)})",
                f"{sum(n.within_round for n in fair.newcomers)} of {len(fair.newcomers)}",
            ]
        )
    return rows


ORG_HEADER = ["workload", "policy", "org", "weight", "target (s)", "fair order", "due first"]


def org_attainment_rows(results: Sequence[OrderResult]) -> list[list[str]]:
    """Each org's attainment in the plain fair order and due first, per (workload, policy)."""
    plain = {(r.workload, r.policy): r for r in results if not r.due_first}
    first = {(r.workload, r.policy): r for r in results if r.due_first}
    rows = []
    for key, result in plain.items():
        for org, target in result.targets.items():
            rows.append(
                [
                    *key,
                    org,
                    str(result.weights.get(org, 1)),
                    f"{target:.0f}",
                    _share(result.attainment.get(org)),
                    _share(first[key].attainment.get(org)) if key in first else "-",
                ]
            )
    return rows


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@dataclass(frozen=True)
class Target:
    workload: str
    policy: Policy
    durations: str
    target: str
    measured: str
    met: bool | None


# The sampled median's bound on each workload, in multiples of the floor's (bursty: a predictor
# told the true rates reaches 1.64x there).
SAMPLED_BOUND = {"bursty": 1.7}


MIN_DEEP = 20


def targets(results: Sequence[Result], *, predictor: str = "fairsched") -> list[Target]:
    """The issue's targets for `predictor`, judged on each workload, policy and durations."""
    judged = []
    for result in results:
        ours = result.scores[predictor]
        best = result.scores["floor: told every arrival"]
        before = result.scores["fairsched, one window (before)"]
        naive_ones = [result.scores["naive: pending x avg / capacity"], result.scores["queue depth ahead / drain rate"]]

        def add(target: str, measured: str, met: bool | None, result: Result = result) -> None:
            judged.append(Target(result.workload, result.policy, result.durations, target, measured, met))

        def ratio(a: ErrorFigures, b: ErrorFigures) -> float | None:
            return None if a.median is None or not b.median else a.median / b.median

        bound = SAMPLED_BOUND.get(result.workload, 1.5)
        sampled_ratio = ratio(ours.sampled, best.sampled)
        # A median of a handful of deep charts (a light load has next to none) says nothing.
        deep_ratio = ratio(ours.sampled_deep, best.sampled_deep) if ours.sampled_deep.count >= MIN_DEEP else None
        add(
            f"sampled median <= {bound}x floor",
            _x(sampled_ratio),
            None if sampled_ratio is None else sampled_ratio <= bound,
        )
        add("sampled deep median <= 2x floor", _x(deep_ratio), None if deep_ratio is None else deep_ratio <= 2.0)
        bias = ours.sampled.bias
        add("sampled bias within +-10%", _signed(bias), None if bias is None else abs(bias) <= 0.10)
        enqueue, old = ours.enqueue, before.enqueue
        add(
            "enqueue no worse than before (median, p90)",
            f"{_figure(enqueue)} vs {_figure(old)}",
            None if enqueue.median is None or old.median is None else
            enqueue.median <= old.median * 1.02 and enqueue.p90 <= old.p90 * 1.02,  # type: ignore[operator]
        )  # fmt: skip
        add(
            "enqueue better than both naive predictors (median, p90)",
            f"{_figure(enqueue)} vs " + ", ".join(_figure(n.enqueue) for n in naive_ones),
            None if enqueue.median is None else all(
                n.enqueue.median is not None and enqueue.median < n.enqueue.median and enqueue.p90 < n.enqueue.p90  # type: ignore[operator]
                for n in naive_ones
            ),
        )  # fmt: skip
        for place, coverage, width in (
            ("enqueue", ours.band_enqueue, ours.width_enqueue),
            ("sampled (running included)", ours.band_sampled, ours.width_sampled),
            ("running", ours.band_running, ours.width_running),
        ):
            add(
                f"band coverage {place} 75-90% (median width / time left)",
                f"{_share(coverage)} ({_width(width)})",
                None if coverage is None else 0.75 <= coverage <= 0.9,
            )
        clear_ratio = ratio(ours.org_clear, best.org_clear)
        add(
            "org clear-time median <= 1.3x floor",
            f"{_x(clear_ratio)} ({_share(ours.org_clear.median)}, floor {_share(best.org_clear.median)})",
            None if clear_ratio is None else clear_ratio <= 1.3,
        )
        add(
            "org clear-time band coverage >= 80%",
            _share(ours.band_clear),
            None if ours.band_clear is None else ours.band_clear >= 0.8,
        )
        if result.workload == "drift":
            drift_ratio = ratio(ours.drift_after, ours.drift_before)
            add(
                f"drift: sampled median from {DRIFT_RUNS} runs after the change <= 1.5x before it",
                f"{_x(drift_ratio)} ({_figure(ours.drift_after)} vs {_figure(ours.drift_before)})",
                None if drift_ratio is None else drift_ratio <= 1.5,
            )
    return judged


MISS_BOUND = 0.8


def miss_targets(results: Sequence[Result], *, predictor: str = "fairsched") -> list[Target]:
    """The issue's at-risk target for `predictor`: at half the wait, precision and recall of "will
    miss" both >= MISS_BOUND, on each workload, policy and durations."""
    judged = []
    for result in results:
        halfway = result.scores[predictor].miss_halfway
        for name, value in (("precision", halfway.precision), ("recall", halfway.recall)):
            judged.append(
                Target(
                    result.workload,
                    result.policy,
                    result.durations,
                    f"will miss at half the wait: {name} >= {MISS_BOUND:.0%}",
                    _share(value),
                    None if value is None else value >= MISS_BOUND,
                )
            )
    return judged


JAIN_BOUND = 0.95


def order_targets(results: Sequence[OrderResult]) -> list[Target]:
    """The issue's due-first targets on each workload and policy: due first raises the attainment
    over the plain fair order, its weighted Jain mean over saturated windows stays >= JAIN_BOUND,
    and every small org's first start is within one round."""
    plain = {(r.workload, r.policy): r for r in results if not r.due_first}
    judged = []
    for result in results:
        if not result.due_first or (result.workload, result.policy) not in plain:
            continue
        before = plain[(result.workload, result.policy)]
        fair, newcomers = result.fairness, result.fairness.newcomers
        within = sum(n.within_round for n in newcomers)

        def add(target: str, measured: str, met: bool | None, result: OrderResult = result) -> None:
            judged.append(Target(result.workload, result.policy, "-", target, measured, met))

        add(
            "due first raises attainment over the fair order",
            f"{_share(result.overall)} vs {_share(before.overall)}",
            None if result.overall is None or before.overall is None else result.overall > before.overall,
        )
        add(
            f"due first: weighted Jain mean >= {JAIN_BOUND} in saturated windows",
            f"{_num(fair.jain_mean)} ({len(fair.jain_values)} windows; fair order {_num(before.fairness.jain_mean)})",
            None if fair.jain_mean is None else fair.jain_mean >= JAIN_BOUND,
        )
        add(
            "due first: every small org's first start within one round",
            f"{within} of {len(newcomers)}",
            bool(newcomers) and within == len(newcomers),
        )
    return judged


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Score ETA predictors on open-arrival workloads.")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="default: all")
    parser.add_argument("--policy", action="append", choices=POLICIES, help="default: both")
    parser.add_argument("--scale", type=float, default=1.0, help="sample density (below 1: a quicker look)")
    parser.add_argument("--seed", type=int, help="another draw of every workload (default: each its own)")
    parser.add_argument(
        "--durations",
        action="append",
        choices=DURATIONS,
        help="what the predictors are told of durations: the truth, or learned from finished runs (default: both)",
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    durations = args.durations or DURATIONS
    results = run(
        args.workload or tuple(WORKLOADS),
        args.policy or POLICIES,
        scale=args.scale,
        seed=args.seed,
        durations=durations,
    )
    print(markdown_table(Table(TABLE_HEADER, table_rows(results))))
    print()
    judged = targets(results)
    print(markdown_table(Table(MISS_HEADER, miss_rows(results))))
    print()
    orders = orders_run(args.workload or tuple(WORKLOADS), args.policy or POLICIES, scale=args.scale, seed=args.seed)
    print(markdown_table(Table(ORDER_HEADER, order_rows(orders))))
    print()
    print(markdown_table(Table(ORG_HEADER, org_attainment_rows(orders))))
    print()
    judged += miss_targets(results) + order_targets(orders)
    print(markdown_table(Table(["workload", "policy", "durations", "target", "measured", "met"], [
        [t.workload, t.policy, t.durations, t.target, t.measured, {True: "yes", False: "**no**", None: "-"}[t.met]]
        for t in judged
    ])))  # fmt: skip
    print()
    for result in results:
        if result.durations == durations[0]:
            print(f"{result.workload} / {result.policy}: {result.charts} charts, {result.deep_share:.0%} deep")
    print(f"simulated in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
