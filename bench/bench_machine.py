"""How fast this machine runs right now: three fixed pieces of work, printed first by `make bench`.

    .venv/bin/python bench/bench_machine.py

The same code's figures have moved ~3x between sessions on this 2-core machine (issue 17: the 1M
replan took 2.3-2.8 s in one session and 7.7 s in another, same commit), with nothing else running.
These three figures say which state the machine is in, so that a figure of `make bench` can be read
against the one before it:
- a bare Python loop (the interpreter: the core's replay and the shells around it);
- a numpy sort of 10M floats (memory bandwidth: the core's columns and orders);
- a PostgreSQL sum over 10M generated rows (the server: the replan's load and persist).
Best of 3 each, wall seconds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.backlog import BASE_URL, best

LOOP_STEPS = 20_000_000
SORTED = 10_000_000
ROWS = 10_000_000


def python_loop() -> int:
    total = 0
    for step in range(LOOP_STEPS):
        total += step
    return total


def main() -> None:
    values = np.random.default_rng(17).random(SORTED)
    with psycopg.connect(BASE_URL.rsplit("/", 1)[0] + "/postgres") as connection:
        server = best(lambda: connection.execute("SELECT sum(g) FROM generate_series(1, %s) g", (ROWS,)).fetchone())
    loop = best(python_loop)
    sort = best(lambda: np.sort(values))
    load = os.getloadavg()[0]
    print(
        f"this machine now: Python loop of {LOOP_STEPS:,} steps {loop:.2f} s, numpy sort of {SORTED:,} floats "
        f"{sort:.2f} s, PostgreSQL sum over {ROWS:,} rows {server:.2f} s; load average {load:.1f} on "
        f"{os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
