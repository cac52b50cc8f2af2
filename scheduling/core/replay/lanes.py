"""The lane simulation: the closed form of the replay the contract gives for the case without caps,
later availability or retry budget (the tests check that it agrees with the event replay there)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def lane_replay(
    *,
    now: float,
    budget: int,
    running_finish: Sequence[float],
    running_units: Sequence[int],
    units: Sequence[int],
    avg: Sequence[float],
) -> tuple[list[float], list[float]]:
    """The start and ETA of each chart of the order when no cap, availability or retry budget
    applies.

    1. Seed the lanes: each running chart holds its units until it finishes; when the running
       charts hold more than the budget, the earliest-freed units above the budget free nothing
       (they are dropped); the rest of the budget is free at `now`.
    2. For each chart in order, a chart of c units starts when the c-th earliest lane frees:
       take the c earliest lanes; the last one taken is the start; they are busy until the
       chart's ETA, start + avg.
    """
    release_times = sorted(
        finish for finish, held in zip(running_finish, running_units, strict=True) for _ in range(held)
    )
    lanes = release_times[max(0, len(release_times) - budget) :]
    lanes += [now] * (budget - len(lanes))
    heapq.heapify(lanes)
    starts: list[float] = []
    etas: list[float] = []
    for chart_units, chart_avg in zip(units, avg, strict=True):
        if chart_units == 1:
            start = lanes[0]
            eta = start + chart_avg
            heapq.heapreplace(lanes, eta)
        else:
            for _ in range(chart_units):
                start = heapq.heappop(lanes)
            eta = start + chart_avg
            for _ in range(chart_units):
                heapq.heappush(lanes, eta)
        starts.append(start)
        etas.append(eta)
    return starts, etas
