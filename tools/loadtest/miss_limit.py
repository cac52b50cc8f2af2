"""`python -m tools.loadtest.miss_limit`: how well any predictor told what the simulator's floor is
told can say "will miss" at half the wait (the information limit of the at-risk target).

The floor (`simulate.floor`) is told every arrival and each chart's true duration law, but not the
duration draws: of the runs under way, of the charts ahead, of the chart itself. Its plan replays
one path through them; the chance of missing is over all of them. This measures that chance.

Steps:
1. The promised workload and its scored schedule, as `simulate.run` makes them; the loop's state
   (`_State`) is kept at every half-wait moment (`_Loop.run` with `keep`). The loop is the
   simulator's (`simulate.simulate`: the same steps in the same order); `--check` (and the tests)
   hold its schedule to the simulator's.
2. For each chart scored at half its wait, `draws` times: every duration not yet known at the
   moment drawn afresh from its true law (a running chart's given how long it has run), and the
   schedule continued from the kept state until the chart starts; its chance of missing given that
   start is its own duration's tail at due - start. The mean over the draws is its true chance p.
3. The best predictor given that information says "will miss" when p is at least a threshold; its
   expected precision is the mean p of those it names, its expected recall their p over the sum of
   every p (no other rule on the same information does better in expectation: Neyman-Pearson). The
   realized figures count what happened in the one schedule the simulator scores.
4. The same for a predictor told even the chart's actual start: its chance is its own duration's
   tail at due - start, the one draw no predictor can know (`Chance.given_start`).
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import NormalDist

from scheduling.core import QueuedChart, RunningChart, Scenario, dispatch_walk, fair_order
from scheduling.core.model import Policy
from scheduling.core.service import OrgService, fair_service, start_service
from tools.loadtest import simulate
from tools.loadtest.document import Table, markdown_table
from tools.loadtest.simulate import SimChart, Workload

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
_NORMAL = NormalDist()


@dataclass
class _State:
    """The simulator loop's state at an instant, before its walk (`resume`: the arrivals and
    finishes of the instant are in; `looking`: a kept instant only, no walk there)."""

    served: dict[str, float]
    waiting: dict[str, SimChart]
    running: dict[str, float]
    finishes: list[tuple[float, str]]
    next_arrival: int = 0
    next_sample: float = 0.0
    instant: float = 0.0
    resume: bool = False
    looking: bool = False

    def copy(self) -> _State:
        return replace(
            self, served=dict(self.served), waiting=dict(self.waiting), running=dict(self.running),
            finishes=list(self.finishes),
        )  # fmt: skip


@dataclass
class _Loop:
    """`simulate.simulate`'s loop (no due first), run from any kept state with any durations."""

    workload: Workload
    policy: Policy
    sample_every: float
    queued: dict[str, QueuedChart] = field(init=False)
    by_id: dict[str, SimChart] = field(init=False)

    def __post_init__(self) -> None:
        self.queued = {
            c.id: QueuedChart(c.id, c.org, c.arrival, c.kind.mean, c.kind.cost, due=c.due) for c in self.workload.charts
        }
        self.by_id = {c.id: c for c in self.workload.charts}

    def initial(self) -> _State:
        return _State(dict.fromkeys(self.workload.weights, 0.0), {}, {}, [])

    def run(
        self,
        state: _State,
        durations: Mapping[str, float],
        *,
        keep: Sequence[float] = (),
        stop: str | None = None,
        start: dict[str, float] | None = None,
    ) -> tuple[dict[float, _State], float | None]:
        """Runs on from `state` (changed in place) with `durations`: the states at the instants of
        `keep`, and the start of the chart `stop` (the run ends there). `start`: filled with every
        chart's start."""
        charts, budget, weights = self.workload.charts, self.workload.budget, self.workload.weights
        kept_at = sorted(set(keep))
        next_kept = 0
        kept: dict[float, _State] = {}
        looking = False
        while state.next_arrival < len(charts) or state.waiting or state.finishes:
            instant = state.instant
            if state.resume:
                state.resume = False
                looking, state.looking = state.looking, False
            else:
                while state.finishes and state.finishes[0][0] <= instant:
                    del state.running[heapq.heappop(state.finishes)[1]]
                while state.next_arrival < len(charts) and charts[state.next_arrival].arrival <= instant:
                    state.waiting[charts[state.next_arrival].id] = charts[state.next_arrival]
                    state.next_arrival += 1
                if next_kept < len(kept_at) and kept_at[next_kept] == instant:
                    next_kept += 1
                    kept[instant] = replace(state.copy(), resume=True, looking=looking)
            backlogged = {chart.org for chart in state.waiting.values()}
            orgs, round_under_way = fair_service(
                {org: OrgService(weight, None, state.served[org]) for org, weight in weights.items()},
                ready=backlogged,
                backlogged=backlogged,
                policy=self.policy,
                quantum=1.0,
            )
            if not looking:
                if round_under_way is not None:
                    state.served = {org: max(time, round_under_way) for org, time in state.served.items()}
                if instant >= state.next_sample:
                    state.next_sample += self.sample_every
                scenario = Scenario(
                    now=instant,
                    budget=budget,
                    policy=self.policy,
                    orgs=orgs,
                    queued=[self.queued[chart_id] for chart_id in state.waiting],
                )
                in_flight = [
                    RunningChart(i, self.by_id[i].org, s, self.by_id[i].kind.mean, self.by_id[i].kind.cost)
                    for i, s in state.running.items()
                ]
                for started in dispatch_walk(
                    fair_order(scenario), now=instant, budget=budget, running=in_flight, orgs=orgs
                ):
                    chart = state.waiting.pop(str(started.id))
                    state.running[chart.id] = instant
                    if start is not None:
                        start[chart.id] = instant
                    if chart.id == stop:
                        return kept, instant
                    heapq.heappush(state.finishes, (instant + durations[chart.id], chart.id))
                    state.served[chart.org] += start_service(
                        weight=weights[chart.org], cost=chart.kind.cost, policy=self.policy, quantum=1.0
                    )
            ahead = [math.inf]
            if state.finishes:
                ahead.append(state.finishes[0][0])
            if state.next_arrival < len(charts):
                ahead.append(charts[state.next_arrival].arrival)
            if state.waiting or state.next_arrival < len(charts):
                ahead.append(state.next_sample)
            upcoming = kept_at[next_kept] if next_kept < len(kept_at) else math.inf
            looking = upcoming < min(ahead)
            state.instant = min(*ahead, upcoming)
            if state.instant == math.inf:
                break
        return kept, None


def draw_duration(rng: random.Random, chart: SimChart, lasted: float = 0.0) -> float:
    """A duration from the chart's true lognormal law, given it has lasted `lasted` seconds."""
    sigma = chart.kind.sigma
    mu = math.log(chart.mean) - sigma * sigma / 2
    if lasted <= 0:
        return math.exp(mu + sigma * rng.gauss(0.0, 1.0))
    below = _NORMAL.cdf((math.log(lasted) - mu) / sigma)
    quantile = min(max(below + (1.0 - below) * rng.random(), 1e-15), 1.0 - 1e-15)
    return max(lasted, math.exp(mu + sigma * _NORMAL.inv_cdf(quantile)))


def tail(chart: SimChart, seconds: float) -> float:
    """P(duration > seconds) under the chart's true law."""
    if seconds <= 0:
        return 1.0
    sigma = chart.kind.sigma
    return 1.0 - _NORMAL.cdf((math.log(seconds) - math.log(chart.mean) + sigma * sigma / 2) / sigma)


@dataclass(frozen=True)
class Chance:
    """A chart scored at half its wait: its true chance of missing, that chance given its actual
    start, and whether it missed."""

    chart: str
    chance: float
    missed: bool
    given_start: float = 0.0


def true_chances(
    workload: Workload, schedule: simulate.Schedule, *, sample_every: float, draws: int, seed: int = 0
) -> list[Chance]:
    """Step 2 for every chart of `schedule.halfway` with a due time."""
    loop = _Loop(workload, schedule.policy, sample_every)
    actual = {chart.id: chart.duration for chart in workload.charts}
    kept, _ = loop.run(loop.initial(), actual, keep=list(schedule.halfway.values()))
    rng = random.Random(seed)
    chances = []
    for chart_id, at in sorted(schedule.halfway.items(), key=lambda item: (item[1], item[0])):
        chart = loop.by_id[chart_id]
        if chart.due is None:
            continue
        total = 0.0
        for _ in range(draws):
            state = kept[at].copy()
            state.finishes = [
                (started + draw_duration(rng, loop.by_id[i], at - started), i) for i, started in state.running.items()
            ]
            heapq.heapify(state.finishes)
            fresh = {
                c.id: draw_duration(rng, c) for c in (*state.waiting.values(), *workload.charts[state.next_arrival :])
            }
            _, began = loop.run(state, fresh, stop=chart_id)
            assert began is not None
            total += tail(chart, chart.due - began)
        missed = schedule.finish[chart_id] > chart.due
        chances.append(Chance(chart_id, total / draws, missed, tail(chart, chart.due - schedule.start[chart_id])))
    return chances


@dataclass(frozen=True)
class Limit:
    threshold: float
    named: int
    expected_precision: float | None
    expected_recall: float | None
    precision: float | None
    recall: float | None


def limits(
    chances: Sequence[Chance], thresholds: Sequence[float] = THRESHOLDS, *, given_start: bool = False
) -> list[Limit]:
    """Step 3 (with `given_start`, step 4) at each threshold."""

    def chance(c: Chance) -> float:
        return c.given_start if given_start else c.chance

    expected_misses = sum(map(chance, chances))
    missed = sum(c.missed for c in chances)
    rows = []
    for threshold in thresholds:
        named = [c for c in chances if chance(c) >= threshold]
        expected_hits = sum(map(chance, named))
        hits = sum(c.missed for c in named)
        rows.append(
            Limit(
                threshold,
                len(named),
                expected_hits / len(named) if named else None,
                expected_hits / expected_misses if expected_misses else None,
                hits / len(named) if named else None,
                hits / missed if missed else None,
            )
        )
    return rows


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The information limit of 'will miss' at half the wait.")
    parser.add_argument("--workload", action="append", choices=sorted(simulate.WORKLOADS), help="default: all")
    parser.add_argument("--policy", action="append", choices=simulate.POLICIES, help="default: both")
    parser.add_argument("--scale", type=float, default=1.0, help="as the simulator's")
    parser.add_argument("--seed", type=int, help="another draw of every workload, as the simulator's")
    parser.add_argument("--draws", type=int, default=40, help="duration draws per chart")
    args = parser.parse_args(argv)
    rows = []
    for name in args.workload or tuple(simulate.WORKLOADS):
        workload, sample_every, enqueue_every = simulate._promised_workload(name, scale=args.scale, seed=args.seed)
        for policy in args.policy or simulate.POLICIES:
            began = time.process_time()
            schedule = simulate.scored_schedule(
                workload, policy=policy, sample_every=sample_every, enqueue_every=enqueue_every
            )
            chances = true_chances(workload, schedule, sample_every=sample_every, draws=args.draws)
            missed = sum(c.missed for c in chances)
            for told, given_start in (("the floor's", False), ("and the start", True)):
                expected = sum(c.given_start if given_start else c.chance for c in chances)
                for limit in limits(chances, given_start=given_start):
                    rows.append([
                        name, policy, told, f"{len(chances)} ({missed} missed, {expected:.1f} expected)",
                        f"{limit.threshold:.1f}", str(limit.named),
                        f"{_share(limit.expected_precision)} / {_share(limit.expected_recall)}",
                        f"{_share(limit.precision)} / {_share(limit.recall)}",
                    ])  # fmt: skip
            print(f"{name} / {policy}: {time.process_time() - began:.0f} s CPU", flush=True)
    header = ["workload", "policy", "told", "charts", "threshold", "named", "expected precision / recall", "realized"]
    print(markdown_table(Table(header, rows)))


if __name__ == "__main__":
    main()
