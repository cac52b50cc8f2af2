"""ETA accuracy of an ideal loop: no dispatch overhead, no faults, no failures, perfectly learned
mean durations. It separates what the order itself does to the ETAs from the noise of a live run.

For a sample of charts, at the chart's arrival t, the state of a replay at t (what runs, what
waits) is planned forward without knowledge of later arrivals, with every duration at its
workflow's true mean, and the prediction is compared with the replay's actual finish:
- "contract order, static plan": the core's `plan` on the state (what the live loop writes): one fair
  order, replayed lane by lane; the replay it is judged against recomputes the order at each instant.
- "contract order, replayed plan": a forward replay that recomputes the contract's order at each
  instant, as the dispatcher does.
- "served rounds, static plan" and "served rounds, replayed plan": the what-if order that counts
  running charts as served rounds, planned once (its order at t, fixed) or replayed, and judged by
  its own replay.
- "... later arrivals known (clairvoyant)": the served replay again, told every chart that will
  arrive after t: what is left is the error of the durations alone, the floor of any ETA.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from scheduling.core import OrgPolicy, QueuedChart, RunningChart, Scenario, plan
from scheduling.core.model import Policy
from tools.baselines import (
    Blackout,
    Job,
    Outcome,
    Picker,
    Running,
    fair_picker,
    fixed_order_picker,
    replay,
    served_order,
    served_picker,
)
from tools.loadtest.metrics import ErrorFigures, error_figures

SAMPLE_EVERY = 4


@dataclass
class IdealEta:
    name: str
    errors: ErrorFigures


def workflow_means(jobs: Sequence[Job], workflow_of: Mapping[str, str]) -> dict[str, float]:
    """Each job's expected duration: the mean duration of its workflow's jobs."""
    totals: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        totals[workflow_of[job.id]].append(job.duration)
    mean = {workflow: sum(values) / len(values) for workflow, values in totals.items()}
    return {job.id: mean[workflow_of[job.id]] for job in jobs}


def _state(jobs: Sequence[Job], outcome: Outcome, at: float) -> tuple[list[Job], list[Running]]:
    """What waits (arrived, not started before `at`) and what runs at `at` in a replay."""
    waiting = [job for job in jobs if job.arrival <= at and outcome.start[job.id] >= at]
    running = [
        Running(job, outcome.start[job.id]) for job in jobs if outcome.start[job.id] < at < outcome.finish[job.id]
    ]
    return waiting, running


def _blocked(blackouts: Sequence[Blackout], org: str, at: float) -> bool:
    return any(b.org == org and b.start <= at < b.end for b in blackouts)


def _available(blackouts: Sequence[Blackout], at: float, org: str) -> bool:
    return not _blocked(blackouts, org, at)


def _static_plan(
    job: Job, waiting: list[Job], running: list[Running], *, at: float, budget: int, weights: Mapping[str, int],
    blackouts: Sequence[Blackout], means: Mapping[str, float], policy: Policy,
) -> float | None:  # fmt: skip
    orgs = {
        org: OrgPolicy(weight=0 if _blocked(blackouts, org, at) else weights.get(org, 1))
        for org in {*(j.org for j in waiting), *(r.job.org for r in running)}
    }
    scenario = Scenario(
        now=at,
        budget=budget,
        policy=policy,
        orgs=orgs,
        queued=[QueuedChart(id=j.id, org=j.org, created=j.arrival, avg=means[j.id], cost=j.cost) for j in waiting],
        running=[
            RunningChart(id=r.job.id, org=r.job.org, started=r.started, avg=means[r.job.id], cost=r.job.cost)
            for r in running
        ],
    )
    return plan(scenario).eta[job.id]


def _replayed_plan(
    job: Job, waiting: list[Job], running: list[Running], *, at: float, budget: int, pick: Picker,
    blackouts: Sequence[Blackout], means: Mapping[str, float],
) -> float | None:  # fmt: skip
    expected = [replace(j, duration=means[j.id]) for j in waiting]
    in_flight = [Running(replace(r.job, duration=means[r.job.id]), r.started) for r in running]
    forward = replay(expected, budget=budget, pick=pick, blackouts=blackouts, running=in_flight, now=at)
    return forward.finish.get(job.id)


def ideal_etas(
    jobs: Sequence[Job],
    *,
    budget: int,
    weights: Mapping[str, int],
    blackouts: Sequence[Blackout],
    means: Mapping[str, float],
    fair: Outcome,
    served: Outcome,
    sample_every: int = SAMPLE_EVERY,
    policy: Policy = "round_robin",
    since: float = 0.0,
) -> list[IdealEta]:
    """The ideal ETA errors (see the module doc) over every `sample_every`-th chart by arrival of
    those arriving at `since` or later (charts whose org is held or paused at their arrival are left
    out); `fair` is the contract order's replay under `policy`."""
    sample = [
        job
        for index, job in enumerate(sorted((j for j in jobs if j.arrival >= since), key=lambda j: (j.arrival, j.id)))
        if index % sample_every == 0 and not _blocked(blackouts, job.org, job.arrival)
    ]
    errors: dict[str, list[float]] = defaultdict(list)
    for job in sample:
        at = job.arrival
        waiting, running = _state(jobs, fair, at)
        static = _static_plan(
            job, waiting, running, at=at, budget=budget, weights=weights, blackouts=blackouts, means=means,
            policy=policy,
        )  # fmt: skip
        replayed = _replayed_plan(
            job,
            waiting,
            running,
            at=at,
            budget=budget,
            pick=fair_picker(weights, policy=policy),
            blackouts=blackouts,
            means=means,
        )
        waiting, running = _state(jobs, served, at)
        served_plan = _replayed_plan(
            job, waiting, running, at=at, budget=budget, pick=served_picker(weights), blackouts=blackouts, means=means
        )
        later = [j for j in jobs if j.arrival > at]
        clairvoyant = _replayed_plan(
            job, [*waiting, *later], running, at=at, budget=budget, pick=served_picker(weights),
            blackouts=blackouts, means=means,
        )  # fmt: skip
        order = [j.id for j in served_order(waiting, running, weights, partial(_available, blackouts, at))]
        served_static = _replayed_plan(
            job, waiting, running, at=at, budget=budget, pick=fixed_order_picker(order), blackouts=blackouts,
            means=means,
        )  # fmt: skip
        predictions = {
            "contract order, static plan (what the live loop writes)": (static, fair.finish[job.id]),
            "contract order, replayed plan": (replayed, fair.finish[job.id]),
            "served rounds, static plan": (served_static, served.finish[job.id]),
            "served rounds, replayed plan": (served_plan, served.finish[job.id]),
            "served rounds, replayed plan, later arrivals known (clairvoyant)": (clairvoyant, served.finish[job.id]),
        }
        for name, (predicted, actual) in predictions.items():
            if predicted is not None and actual > at:
                errors[name].append((predicted - actual) / (actual - at))
    return [IdealEta(name, error_figures(values)) for name, values in errors.items()]
