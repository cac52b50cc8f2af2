"""How early the next starts come when several charts run: the plan's starts against the true ones,
by how many charts run (issue #25; docs/eta-order.md). Figures, not timings.

    .venv/bin/python bench/bench_start_order.py [--part closed|simulator] [--scale 0.25] [--draws 400]

1. `closed`: k charts running (k = 1, 2, 3, 5, 10, 20), each of a kind of the simulator's
   (`simulate.KINDS`, cost 1) and run for a uniform 0-1.5 of its mean, 2k charts of such kinds
   queued in one org, budget k. The plan is told the true means and spreads; each of `--draws`
   scenarios is played once with durations drawn from their laws (a running chart's given how long
   it has run). Per k: the next start (the first queued chart's), the other starts the running
   charts' lanes give (queue places 2..k), the ETAs of those k shallow charts and of the k deep ones
   behind: error median / p90 / signed median of (planned - actual) / (actual - now), positive:
   late; `<=`: the share of the actual starts (finishes) by the planned time (1/2: a median).
2. `simulator`: the simulator's workloads (`tools.loadtest.simulate`, true and learned durations),
   at every sampled moment the planned start of each chart waiting then against its actual start,
   for fairsched's plan and the floor's, by how many charts run then and by the chart's rank among
   the starts to come (1: the next start).

The figures (`--draws 400`, `--scale 0.25`) of main at 2927078 and of the rule tried on branch
`order` (commit d4d3f25, reverted: the running charts' lanes freed at the medians of their finishes'
order statistics) are in docs/eta-order.md. Figures, not timings: the machine's load changes none.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from statistics import NormalDist

from scheduling.core import History, PastSubmission, QueuedChart, RunningChart, Scenario, plan
from scheduling.core.model import Plan
from tools.loadtest import simulate as sim
from tools.loadtest.document import Table, markdown_table
from tools.loadtest.metrics import error_figures

COUNTS = (1, 2, 3, 5, 10, 20)
NORMAL = NormalDist()


def _left(rng: random.Random, *, lasted: float, avg: float, sigma: float) -> float:
    """A run's time left given it has lasted `lasted`: a lognormal D of mean `avg` given D > `lasted`,
    drawn by inverting its tail (Q(z) = u for u uniform below Q(z_lasted))."""
    mu = math.log(avg) - sigma * sigma / 2
    tail = 1.0 if lasted <= 0 else math.erfc((math.log(lasted) - mu) / sigma / math.sqrt(2)) / 2
    return math.exp(mu - sigma * NORMAL.inv_cdf(max(rng.random() * tail, 1e-300))) - lasted


def _figure(values: Sequence[float]) -> str:
    figures = error_figures(values)
    if figures.median is None:
        return "-"
    return f"{figures.median:.2f} / {figures.p90:.2f} / {figures.bias:+.2f}"


def _share(flags: Sequence[bool]) -> str:
    return f"{sum(flags) / len(flags):.0%}" if flags else "-"


def closed(draws: int) -> list[list[str]]:
    """Part 1's rows (see the module doc)."""
    rows = []
    for count in COUNTS:
        rng = random.Random(count)
        errors: dict[str, list[float]] = defaultdict(list)
        by: dict[str, list[bool]] = defaultdict(list)
        for _ in range(draws):
            now = 1000.0
            kinds = [rng.choice(sim.KINDS) for _ in range(3 * count)]
            lasted = [rng.uniform(0.0, 1.5 * kind.mean) for kind in kinds[:count]]
            running = [
                RunningChart(f"r{i}", f"o{i}", started=now - lasted[i], avg=kind.mean)
                for i, kind in enumerate(kinds[:count])
            ]
            queued = [QueuedChart(f"q{j}", "a", created=j, avg=kind.mean) for j, kind in enumerate(kinds[count:])]
            result = plan(
                Scenario(
                    now=now, budget=count, running=running, queued=queued,
                    spread=[kind.sigma for kind in kinds[count:]],
                    running_spread=[kind.sigma for kind in kinds[:count]],
                )
            )  # fmt: skip
            lanes = [
                now + _left(rng, lasted=lasted[i], avg=kind.mean, sigma=kind.sigma)
                for i, kind in enumerate(kinds[:count])
            ]
            heapq.heapify(lanes)
            for j, kind in enumerate(kinds[count:]):
                start = heapq.heappop(lanes)
                finish = start + kind.mean * math.exp(rng.gauss(-kind.sigma * kind.sigma / 2, kind.sigma))
                heapq.heappush(lanes, finish)
                planned, eta = result.start[f"q{j}"], result.eta[f"q{j}"]
                assert planned is not None
                assert eta is not None
                place = "next start" if j == 0 else "starts 2..k" if j < count else None
                if place:
                    errors[place].append((planned - start) / (start - now))
                    by[place].append(start <= planned)
                eta_place = "shallow ETAs" if j < count else "deep ETAs"
                errors[eta_place].append((eta - finish) / (finish - now))
                by[eta_place].append(finish <= eta)
        for place in ("next start", "starts 2..k", "shallow ETAs", "deep ETAs"):
            if errors[place]:
                rows.append([str(count), place, _figure(errors[place]), _share(by[place])])
    return rows


def _fairsched_plan(context: sim.Context) -> Plan:
    """fairsched's plan at the moment, as `simulate.fairsched` makes it."""
    since = max(0.0, context.moment.at - sim.HISTORY_DECAYS * sim.ARRIVAL_WINDOW)
    submissions = [
        PastSubmission(org=c.org, created=c.arrival, avg=avg, cost=c.kind.cost, spread=spread)
        for c in context.arrived[bisect.bisect_left(context.arrival_times, since) :]
        for avg, spread in (context.durations(c),)
    ]
    history = History(submissions, since=since, decay=sim.ARRIVAL_WINDOW)
    return plan(sim._scenario(context, history=history))


def _floor_plan(context: sim.Context) -> Plan:
    """The floor's plan at the moment, as `simulate.floor` makes it."""
    schedule, moment = context.schedule, context.moment
    last = max((schedule.finish[chart.id] for chart in moment.waiting), default=moment.at)
    coming = [
        QueuedChart(c.id, c.org, c.arrival, c.mean, c.kind.cost, available_at=c.arrival, due=c.due)
        for c in context.future
        if c.arrival < last
    ]
    scenario = sim._scenario(context, truth=True)
    return plan(replace(scenario, queued=[*scenario.queued, *coming], spread=()))


PLANS: dict[str, Callable[[sim.Context], Plan]] = {"fairsched": _fairsched_plan, "floor": _floor_plan}


def _running_bucket(count: int) -> str:
    for low, high in ((0, 4), (5, 9), (10, 14), (15, 19)):
        if low <= count <= high:
            return f"{low}-{high}"
    return "20+"


def simulated(scale: float, workloads: Sequence[str] = tuple(sim.WORKLOADS)) -> list[list[str]]:
    """Part 2's rows (see the module doc): the sampled moments of every workload and policy, as
    `simulate.score` visits them (learned durations fed every run finished by the moment)."""
    errors: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    by: dict[tuple[str, str, str, str], list[bool]] = defaultdict(list)
    for name in workloads:
        workload, sample_every, enqueue_every = sim._promised_workload(name, scale=scale, seed=None)
        for policy in sim.POLICIES:
            schedule = sim.simulate(workload, policy=policy, sample_every=sample_every, enqueue_every=enqueue_every)
            for known in sim.DURATIONS:
                for context in sim.contexts(schedule, durations=known):
                    moment = context.moment
                    if not moment.sampled or not moment.waiting:
                        continue
                    at = moment.at
                    coming = sorted(schedule.start[chart.id] for chart in moment.waiting)
                    bucket = _running_bucket(len(moment.running))
                    for predictor, planned_by in PLANS.items():
                        if predictor == "floor" and known == "learned":
                            continue  # the floor is told the truth either way
                        result = planned_by(context)
                        for chart in moment.waiting:
                            planned, actual = result.start[chart.id], schedule.start[chart.id]
                            if planned is None or actual <= at:
                                continue
                            rank = bisect.bisect_left(coming, actual) + 1
                            ranked = "next" if rank == 1 else "2-5" if rank <= 5 else "6+"
                            for key in ((predictor, known, bucket, ranked), (predictor, known, "all", ranked)):
                                errors[key].append((planned - actual) / (actual - at))
                                by[key].append(actual <= planned)
    return [[*key, str(len(values)), _figure(values), _share(by[key])] for key, values in sorted(errors.items())]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The plan's next starts against the true ones.")
    parser.add_argument("--part", action="append", choices=("closed", "simulator"), help="default: both")
    parser.add_argument("--scale", type=float, default=0.25, help="the simulator's sample density")
    parser.add_argument("--workload", action="append", choices=sorted(sim.WORKLOADS), help="default: all")
    parser.add_argument("--draws", type=int, default=400, help="closed scenarios per running count")
    args = parser.parse_args(argv)
    parts = args.part or ("closed", "simulator")
    if "closed" in parts:
        header = ["running", "what", "error median / p90 / signed", "actual <= planned"]
        print(markdown_table(Table(header, closed(args.draws))))
        print()
    if "simulator" in parts:
        header = [
            "predictor",
            "durations",
            "running",
            "rank",
            "n",
            "start error median / p90 / signed",
            "actual <= planned",
        ]
        print(markdown_table(Table(header, simulated(args.scale, args.workload or tuple(sim.WORKLOADS)))))


if __name__ == "__main__":
    main()
