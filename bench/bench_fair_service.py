"""Benchmark of the fair-service step of a snapshot (a benchmark to report, never a timed test).

    .venv/bin/python bench/bench_fair_service.py

Which orgs are backlogged and which of them can start now (`snapshot.backlogged_and_ready`), then
each org's place in the round under way (`snapshot.fair_service`), over the columns of 100k and 1M
queued charts from 500 orgs (some held, some capped, some charts paused, in the high tier or in
backoff). No database: the columns are built in memory. Each figure is the best of three runs.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

import django

django.setup()

from scheduling import core  # noqa: E402
from scheduling.snapshot import OrgRow, backlogged_and_ready, fair_service  # noqa: E402

ORGS = 500
NOW = 1e9


def columns(size: int, rng: random.Random) -> core.QueueColumns:
    return core.QueueColumns(
        id=[str(i) for i in range(size)],
        org=[str(rng.randrange(ORGS)) for _ in range(size)],
        created=[0.0] * size,
        avg=[60.0] * size,
        cost=[1] * size,
        high_priority=[i % 97 == 0 for i in range(size)],
        paused=[i % 89 == 0 for i in range(size)],
        priority=[0] * size,
        available_at=[None if i % 13 else NOW + 60 for i in range(size)],
        retry=[False] * size,
    )


def main() -> None:
    rng = random.Random(1)
    orgs = {
        str(i): OrgRow(f"o{i}", rng.randint(0, 5), rng.choice([None, None, 3]), rng.random() * 50, None)
        for i in range(ORGS)
    }
    running = [core.RunningChart(id=f"r{i}", org=str(i % ORGS), started=0.0, avg=60.0) for i in range(200)]
    for size in (100_000, 1_000_000):
        queued = columns(size, rng)
        best = float("inf")
        for _ in range(3):
            began = time.perf_counter()
            backlogged, ready = backlogged_and_ready(queued, running, orgs, NOW)
            fair_service(orgs, ready=ready, backlogged=backlogged, policy="round_robin", quantum=1.0)
            best = min(best, time.perf_counter() - began)
        print(f"{size:>9,} queued charts, {ORGS} orgs: backlogged, ready and fair service {best * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
