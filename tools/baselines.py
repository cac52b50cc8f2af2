"""Replays of one workload under several policies: fairsched's own, a single FIFO queue, the design
note's proportional-rounding split, and a what-if order. The load report sets them side by side.

A workload is a list of `Job`s (arrival, duration, cost) plus `Blackout`s: windows in which an org's
charts may not start (a held org, a paused provider). Every replay is the same event-driven loop
(`replay`): decision instants are arrivals, finishes and blackout ends; at each instant the finishes
due are counted first, the arrivals due join the queue, then the policy's picker chooses what starts.
All pickers share the contract's dispatch rules: a chart occupies c = min(cost, budget) units,
and a chart whose c exceeds the free budget stops the walk (head of line); skips are per policy.

- `replay_fair`: the contract's fair order (`fair_order`) walked by `dispatch_walk`, recomputed at
  every instant; an org in a blackout is held (weight 0), exactly as the live system holds it.
- `replay_loop`: the fair order as the live loop gives it: each org's place in the rounds kept from
  instant to instant (`scheduling.core.service`, as the simulator keeps it), idle and held orgs
  raised to the round under way; with `due_first`, each org's charts by due time inside its share.
- `replay_fair_served`: a what-if, not the contract: the same walk, but an org's running charts count
  as rounds already served (its k-th waiting chart is in round floor((running + k) / weight)), so
  the order remembers who holds the pool. The contract's order is recomputed from the waiting charts
  alone, so when one slot frees at a time the org with the oldest head wins round 0 every time.
  With `due_first`, each org's own charts are ordered by due time inside its share
  (`Scenario.due_first`), the rounds across orgs untouched.
- `replay_fifo`: one queue, oldest first (arrival, then id).
- `replay_proportional`: slots_i = round(C x q_i / Q), with q_i the org's outstanding charts
  (waiting and running) and Q their sum over orgs, recomputed at each instant; an org runs at most
  slots_i units, oldest first, and a chart of an org at its slots is skipped. Rounding can leave the
  pool idle with work waiting; only when nothing runs at all does the oldest available chart start,
  so that the replay always ends.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduling.core import OrgPolicy, QueuedChart, RunningChart, Scenario, dispatch_walk, fair_order
from scheduling.core.model import Policy
from scheduling.core.service import OrgService, fair_service, start_service


@dataclass(frozen=True, slots=True)
class Job:
    """One chart of the workload: it arrives, waits, runs `duration` seconds holding `cost` units;
    `due`: when its turnaround promise falls due (None: no promise)."""

    id: str
    org: str
    arrival: float
    duration: float
    cost: int = 1
    due: float | None = None


@dataclass(frozen=True, slots=True)
class Blackout:
    """The charts of `org` may not start in [start, end) (a hold, a provider pause)."""

    org: str
    start: float
    end: float


@dataclass
class Outcome:
    """When each job started and finished under one policy (every job gets both)."""

    start: dict[str, float] = field(default_factory=dict)
    finish: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Running:
    job: Job
    started: float


Picker = Callable[[float, list[Job], list[Running], Callable[[str], bool], int], list[Job]]
"""(instant, waiting in arrival order, running, is the org available now, budget) -> jobs to start."""


def replay(
    jobs: Sequence[Job],
    *,
    budget: int,
    pick: Picker,
    blackouts: Sequence[Blackout] = (),
    running: Sequence[Running] = (),
    now: float | None = None,
) -> Outcome:
    """Run `jobs` through the picker from the first arrival (or `now`) until the last finish.

    1. Events: arrivals (in (arrival, id) order), finishes (a heap, seeded with the jobs already
       `running`, each finishing at its start + duration), blackout ends.
    2. At each instant: count the finishes due, add the arrivals due, ask `pick` what starts.
    3. A started job finishes at instant + duration; move to the next event.
    """
    arrivals = sorted(jobs, key=lambda job: (job.arrival, job.id))
    wakeups = sorted({b.end for b in blackouts})
    by_org: dict[str, list[Blackout]] = defaultdict(list)
    for blackout in blackouts:
        by_org[blackout.org].append(blackout)
    outcome = Outcome()
    waiting: list[Job] = []
    in_flight: dict[str, Running] = {run.job.id: run for run in running}
    finishes: list[tuple[float, str]] = [(run.started + run.job.duration, run.job.id) for run in running]
    heapq.heapify(finishes)
    next_arrival = next_wakeup = 0
    instant = now if now is not None else (arrivals[0].arrival if arrivals else 0.0)
    while next_arrival < len(arrivals) or finishes or waiting:
        while finishes and finishes[0][0] <= instant:
            in_flight.pop(heapq.heappop(finishes)[1])
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= instant:
            waiting.append(arrivals[next_arrival])
            next_arrival += 1

        def available(org: str, at: float = instant) -> bool:
            return not any(b.start <= at < b.end for b in by_org.get(org, ()))

        started = pick(instant, waiting, list(in_flight.values()), available, budget)
        if started:
            chosen = {job.id for job in started}
            waiting = [job for job in waiting if job.id not in chosen]
            for job in started:
                in_flight[job.id] = Running(job, instant)
                outcome.start[job.id] = instant
                outcome.finish[job.id] = instant + job.duration
                heapq.heappush(finishes, (instant + job.duration, job.id))
        while next_wakeup < len(wakeups) and wakeups[next_wakeup] <= instant:
            next_wakeup += 1
        ahead = [
            *([finishes[0][0]] if finishes else []),
            *([arrivals[next_arrival].arrival] if next_arrival < len(arrivals) else []),
            *([wakeups[next_wakeup]] if next_wakeup < len(wakeups) and waiting else []),
        ]
        if not ahead:
            break  # only jobs that can never start are left (a blackout without end)
        instant = min(ahead)
    return outcome


def _units(job: Job, budget: int) -> int:
    return min(job.cost, budget)


def _free_budget(running: Sequence[Running], budget: int) -> int:
    return budget - sum(_units(r.job, budget) for r in running)


def pick_fifo(
    instant: float, waiting: list[Job], running: list[Running], available: Callable[[str], bool], budget: int
) -> list[Job]:
    """Oldest first: skip unavailable orgs, stop at the first chart the free budget cannot hold."""
    free = _free_budget(running, budget)
    started: list[Job] = []
    for job in waiting:
        if not available(job.org):
            continue
        if _units(job, budget) > free:
            break
        free -= _units(job, budget)
        started.append(job)
    return started


def proportional_slots(outstanding: Mapping[str, int], budget: int) -> dict[str, int]:
    """slots_i = round(C x q_i / Q), halves rounded up; empty when nothing is outstanding."""
    total = sum(outstanding.values())
    if total == 0:
        return {}
    return {org: math.floor(budget * count / total + 0.5) for org, count in outstanding.items()}


def pick_proportional(
    instant: float, waiting: list[Job], running: list[Running], available: Callable[[str], bool], budget: int
) -> list[Job]:
    """Each org runs at most its proportional slots, oldest first; budget and head of line as always.

    1. q_i = the org's waiting plus running charts (orgs in a blackout count too: their queue is
       real, they just cannot use it); slots_i from `proportional_slots`.
    2. Walk the waiting charts oldest first: skip an unavailable org or one whose running units plus
       this chart's would pass its slots; stop at a chart the free budget cannot hold.
    3. If nothing runs and nothing started, start the oldest available chart that fits alone.
    """
    outstanding: dict[str, int] = defaultdict(int)
    used: dict[str, int] = defaultdict(int)
    for job in waiting:
        outstanding[job.org] += 1
    for run in running:
        outstanding[run.job.org] += 1
        used[run.job.org] += _units(run.job, budget)
    slots = proportional_slots(outstanding, budget)
    free = _free_budget(running, budget)
    started: list[Job] = []
    for job in waiting:
        units = _units(job, budget)
        if not available(job.org) or used[job.org] + units > slots[job.org]:
            continue
        if units > free:
            break
        free -= units
        used[job.org] += units
        started.append(job)
    if not started and not running:
        first = next((job for job in waiting if available(job.org)), None)
        if first is not None:
            started.append(first)
    return started


def fair_picker(weights: Mapping[str, int], *, policy: str = "round_robin", due_first: bool = False) -> Picker:
    """A picker that walks the contract's fair order (with `due_first`: each org's charts by due time
    inside its share); an org in a blackout has weight 0 (held)."""

    def pick(
        instant: float, waiting: list[Job], running: list[Running], available: Callable[[str], bool], budget: int
    ) -> list[Job]:
        orgs = {
            org: OrgPolicy(weight=weights.get(org, 1) if available(org) else 0)
            for org in {*weights, *(job.org for job in waiting), *(r.job.org for r in running)}
        }
        scenario = Scenario(
            now=instant,
            budget=budget,
            policy="deficit" if policy == "deficit" else "round_robin",
            orgs=orgs,
            queued=[
                QueuedChart(id=j.id, org=j.org, created=j.arrival, avg=j.duration, cost=j.cost, due=j.due)
                for j in waiting
            ],
            due_first=due_first,
        )
        in_flight = [
            RunningChart(id=r.job.id, org=r.job.org, started=r.started, avg=r.job.duration, cost=r.job.cost)
            for r in running
        ]
        order = fair_order(scenario)
        chosen = {c.id for c in dispatch_walk(order, now=instant, budget=budget, running=in_flight, orgs=orgs)}
        return [job for job in waiting if job.id in chosen]

    return pick


def loop_picker(weights: Mapping[str, int], *, policy: Policy = "round_robin", due_first: bool = False) -> Picker:
    """A picker that walks the contract's fair order as the live loop gives it: each org's place in
    the rounds kept from instant to instant (`scheduling.core.service`), as the simulator does.

    1. Backlogged orgs: those with a chart waiting and no blackout; `fair_service` gives each org its
       `served` offset in the rounds under way, and every other org is raised to that round.
    2. An org in a blackout has weight 0 (held); the order (with `due_first`: each org's charts by due
       time inside its share) is walked by `dispatch_walk`.
    3. Each start adds `start_service` to its org's virtual time.
    """
    virtual: dict[str, float] = defaultdict(float)

    def pick(
        instant: float, waiting: list[Job], running: list[Running], available: Callable[[str], bool], budget: int
    ) -> list[Job]:
        known = {*weights, *(job.org for job in waiting), *(r.job.org for r in running)}
        backlogged = {job.org for job in waiting if available(job.org)}
        policies, round_under_way = fair_service(
            {org: OrgService(weights.get(org, 1), None, virtual[org]) for org in known},
            ready=backlogged,
            backlogged=backlogged,
            policy=policy,
            quantum=1.0,
        )
        if round_under_way is not None:
            for org in known:
                virtual[org] = max(virtual[org], round_under_way)
        orgs = {org: given if available(org) else replace(given, weight=0) for org, given in policies.items()}
        scenario = Scenario(
            now=instant,
            budget=budget,
            policy=policy,
            orgs=orgs,
            queued=[
                QueuedChart(id=j.id, org=j.org, created=j.arrival, avg=j.duration, cost=j.cost, due=j.due)
                for j in waiting
            ],
            due_first=due_first,
        )
        in_flight = [
            RunningChart(id=r.job.id, org=r.job.org, started=r.started, avg=r.job.duration, cost=r.job.cost)
            for r in running
        ]
        walked = dispatch_walk(fair_order(scenario), now=instant, budget=budget, running=in_flight, orgs=orgs)
        chosen = {c.id for c in walked}
        started = [job for job in waiting if job.id in chosen]
        for job in started:
            virtual[job.org] += start_service(weight=weights.get(job.org, 1), cost=job.cost, policy=policy, quantum=1.0)
        return started

    return pick


def served_order(
    waiting: Sequence[Job], running: Sequence[Running], weights: Mapping[str, int], available: Callable[[str], bool]
) -> list[Job]:
    """The waiting jobs of available orgs by (round, arrival, id), an org's k-th waiting job being in
    round floor((its running jobs + k) / weight)."""
    served: dict[str, int] = defaultdict(int)
    for run in running:
        served[run.job.org] += 1
    rank: dict[str, int] = defaultdict(int)
    keyed: list[tuple[int, float, str, Job]] = []
    for job in sorted(waiting, key=lambda j: (j.arrival, j.id)):
        weight = weights.get(job.org, 1)
        if weight == 0 or not available(job.org):
            continue
        keyed.append(((served[job.org] + rank[job.org]) // weight, job.arrival, job.id, job))
        rank[job.org] += 1
    keyed.sort(key=lambda key: key[:3])
    return [job for *_, job in keyed]


def walk_order(order: Sequence[Job], waiting: Sequence[Job], running: Sequence[Running], budget: int) -> list[Job]:
    """The jobs of `order` that start now under the contract's walk (head of line, budget)."""
    queued = [QueuedChart(id=j.id, org=j.org, created=j.arrival, avg=j.duration, cost=j.cost) for j in order]
    in_flight = [
        RunningChart(id=r.job.id, org=r.job.org, started=r.started, avg=r.job.duration, cost=r.job.cost)
        for r in running
    ]
    chosen = {c.id for c in dispatch_walk(queued, now=0.0, budget=budget, running=in_flight, orgs={})}
    return [job for job in waiting if job.id in chosen]


def served_picker(weights: Mapping[str, int]) -> Picker:
    """A picker whose order counts each org's running charts as rounds it was already served
    (`served_order`, recomputed at each instant), walked by the contract's `dispatch_walk`."""

    def pick(
        instant: float, waiting: list[Job], running: list[Running], available: Callable[[str], bool], budget: int
    ) -> list[Job]:
        return walk_order(served_order(waiting, running, weights, available), waiting, running, budget)

    return pick


def fixed_order_picker(order: Sequence[str]) -> Picker:
    """A picker that walks one order fixed in advance (job ids), as a static plan assumes."""
    rank = {job_id: index for index, job_id in enumerate(order)}

    def pick(
        instant: float, waiting: list[Job], running: list[Running], available: Callable[[str], bool], budget: int
    ) -> list[Job]:
        ordered = sorted((j for j in waiting if j.id in rank and available(j.org)), key=lambda j: rank[j.id])
        return walk_order(ordered, waiting, running, budget)

    return pick


def replay_fifo(jobs: Sequence[Job], *, budget: int, blackouts: Sequence[Blackout] = ()) -> Outcome:
    """The workload through a single FIFO queue."""
    return replay(jobs, budget=budget, pick=pick_fifo, blackouts=blackouts)


def replay_proportional(jobs: Sequence[Job], *, budget: int, blackouts: Sequence[Blackout] = ()) -> Outcome:
    """The workload through the proportional-rounding split."""
    return replay(jobs, budget=budget, pick=pick_proportional, blackouts=blackouts)


def replay_fair(
    jobs: Sequence[Job],
    *,
    budget: int,
    weights: Mapping[str, int],
    blackouts: Sequence[Blackout] = (),
    policy: str = "round_robin",
    due_first: bool = False,
) -> Outcome:
    """The workload through fairsched's fair order and dispatch walk (the core, instant by instant);
    with `due_first`, each org's charts by due time inside its share."""
    pick = fair_picker(weights, policy=policy, due_first=due_first)
    return replay(jobs, budget=budget, pick=pick, blackouts=blackouts)


def replay_loop(
    jobs: Sequence[Job],
    *,
    budget: int,
    weights: Mapping[str, int],
    blackouts: Sequence[Blackout] = (),
    policy: Policy = "round_robin",
    due_first: bool = False,
) -> Outcome:
    """The workload through the fair order as the live loop keeps it (`loop_picker`): the live run
    without its overhead, faults or failures."""
    pick = loop_picker(weights, policy=policy, due_first=due_first)
    return replay(jobs, budget=budget, pick=pick, blackouts=blackouts)


def replay_fair_served(
    jobs: Sequence[Job], *, budget: int, weights: Mapping[str, int], blackouts: Sequence[Blackout] = ()
) -> Outcome:
    """The what-if order that counts running charts as served rounds (`served_picker`)."""
    return replay(jobs, budget=budget, pick=served_picker(weights), blackouts=blackouts)
