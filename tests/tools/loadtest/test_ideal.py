"""ETA accuracy of the ideal loop on hand-checked workloads."""

from __future__ import annotations

import pytest

from tools.baselines import Job, replay_fair, replay_fair_served
from tools.loadtest.ideal import ideal_etas, workflow_means
from tools.loadtest.metrics import ErrorFigures


def test_workflow_means_average_each_workflow() -> None:
    jobs = [Job("a", "o", 0, 1), Job("b", "o", 0, 3), Job("c", "o", 0, 10)]
    means = workflow_means(jobs, {"a": "w", "b": "w", "c": "v"})
    assert means == {"a": 2, "b": 2, "c": 10}


def test_exact_durations_and_no_later_arrivals_make_every_plan_exact() -> None:
    # Everything arrives at 0 and lasts exactly its mean: every plan agrees with its replay.
    jobs = [Job(f"{org}{i}", org, 0, 2) for org in ("a", "b") for i in range(4)]
    weights = {"a": 1, "b": 1}
    fair = replay_fair(jobs, budget=2, weights=weights)
    served = replay_fair_served(jobs, budget=2, weights=weights)
    means = {job.id: 2.0 for job in jobs}
    results = ideal_etas(
        jobs, budget=2, weights=weights, blackouts=[], means=means, fair=fair, served=served, sample_every=1
    )
    assert len(results) == 5
    for result in results:
        assert result.errors.count == len(jobs)
        assert result.errors.p90 == pytest.approx(0.0)


def errors_by_name(jobs: list[Job], *, budget: int, weights: dict[str, int]) -> dict[str, ErrorFigures]:
    """Every ideal prediction's errors over every chart, with each duration known exactly."""
    results = ideal_etas(
        jobs, budget=budget, weights=weights, blackouts=[], means={job.id: job.duration for job in jobs},
        fair=replay_fair(jobs, budget=budget, weights=weights),
        served=replay_fair_served(jobs, budget=budget, weights=weights), sample_every=1,
    )  # fmt: skip
    return {result.name: result.errors for result in results}


def test_the_static_plan_misses_the_reordering_of_the_dispatcher() -> None:
    # Budget 1: org a has three charts, org b arrives with one at 0.5. The static plan at 0.5 puts
    # b0 in round 0 right after a1; the dispatcher, recomputing rounds, runs a1, a2, then b0.
    jobs = [Job("a0", "a", 0, 1), Job("a1", "a", 0, 1), Job("a2", "a", 0, 1), Job("b0", "b", 0.5, 1)]
    weights = {"a": 1, "b": 1}
    assert replay_fair(jobs, budget=1, weights=weights).finish["b0"] == 4
    results = errors_by_name(jobs, budget=1, weights=weights)
    static = results["contract order, static plan (what the live loop writes)"]
    replayed = results["contract order, replayed plan"]
    # b0 at 0.5: static plan says it finishes at 3 (after a0, a1), actually at 4: error 1 / 3.5.
    assert static.p90 is not None
    assert static.p90 > 0.2
    assert replayed.p90 == pytest.approx(0.0)


def test_the_clairvoyant_plan_knows_the_later_arrivals() -> None:
    # Budget 2: a runs a0 (1 s) and a1 (2 s) from 0; b arrives at 0.5. When a0 ends at 1, a still
    # holds a round with a1, so b0 takes the slot and a2 waits until 2. Predicted at 0 without b,
    # a2 finishes at 2; it finishes at 3. Told of b, the prediction is exact.
    jobs = [Job("a0", "a", 0, 1), Job("a1", "a", 0, 2), Job("a2", "a", 0, 1), Job("b0", "b", 0.5, 1)]
    weights = {"a": 1, "b": 1}
    assert replay_fair_served(jobs, budget=2, weights=weights).finish["a2"] == 3
    results = errors_by_name(jobs, budget=2, weights=weights)
    blind = results["served rounds, replayed plan"]
    clairvoyant = results["served rounds, replayed plan, later arrivals known (clairvoyant)"]
    assert blind.p90 is not None
    assert blind.p90 > 0.2
    assert clairvoyant.p90 == pytest.approx(0.0)
