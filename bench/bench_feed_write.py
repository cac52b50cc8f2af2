"""Benchmark what the change feed's transaction id costs the event log's writes.

    .venv/bin/python bench/bench_feed_write.py [--rows 10000] [--rounds 15]

Two copies of the chart event table in a scratch schema of DATABASE_URL's database, alike but for the
feed's column (`txid`, default `pg_current_xact_id()`) and its index (txid, id): each round inserts
`--rows` events into each, in one transaction each (as a bulk submission writes its charts' events),
in alternating order. Prints the median time of a round per table and the difference per event. The
single-event path (a transition) pays the same per row. On a machine shared with other work, compare
the two figures of one run, not figures of different runs (bench/bench_api.py's whole-server figures
move by more than this between runs).

Measured 2026-12-02 on the shared 2-core machine (load 3-6): 10,000 events a transaction, without /
with the column and its index: 97.4 / 95.6 ms (15 rounds) and 107.2 / 124.8 ms (25 rounds, +1.8 us an
event); one event a transaction: 3.9 / 3.9 ms (400 rounds). So at most ~20 ms of a 10,000-chart bulk
submission (2-3.5 s a request on that machine, bench/bench_api.py) and nothing measurable on a single
transition. bench_api.py itself, same arguments, main then this branch: bulk 2,958 vs 4,020 charts/s,
single 37 vs 79 charts/s: the machine's other work, not the change.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import psycopg

TABLE = """
CREATE TABLE {schema}.{name} (
    id bigserial PRIMARY KEY,
    chart_id bigint NOT NULL,
    from_state varchar(16) NOT NULL,
    to_state varchar(16) NOT NULL,
    actor varchar(200) NOT NULL,
    reason varchar(1000) NOT NULL,
    at timestamptz NOT NULL
    {extra}
);
CREATE INDEX ON {schema}.{name} (chart_id, at);
CREATE INDEX ON {schema}.{name} (at DESC);
"""
FEED_COLUMN = ", txid bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint)"
INSERT = (
    "INSERT INTO {schema}.{name} (chart_id, from_state, to_state, actor, reason, at)"
    " SELECT n, '', 'queued', 'user:bench', 'submitted', now() FROM generate_series(1, %s) AS n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    schema = f"bench_feed_{os.getpid()}"
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")
    times: dict[str, list[float]] = {"plain": [], "feed": []}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(TABLE.format(schema=schema, name="plain", extra=""))
            conn.execute(TABLE.format(schema=schema, name="feed", extra=FEED_COLUMN))
            conn.execute(f"CREATE INDEX ON {schema}.feed (txid, id)")
            for round_index in range(args.rounds):
                order = ("plain", "feed") if round_index % 2 == 0 else ("feed", "plain")
                for name in order:
                    begun = time.perf_counter()
                    with conn.transaction():
                        conn.execute(INSERT.format(schema=schema, name=name), [args.rows])  # type: ignore[arg-type]
                    times[name].append(time.perf_counter() - begun)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    plain, feed = statistics.median(times["plain"]), statistics.median(times["feed"])
    extra = f"{(feed - plain) / plain:+.0%}, {(feed - plain) / args.rows * 1e6:+.2f} us an event"
    print(f"reproduce: .venv/bin/python bench/bench_feed_write.py --rows {args.rows} --rounds {args.rounds}")
    print(
        f"{args.rows} events a transaction, median of {args.rounds}: without the feed's column {plain * 1000:.1f} ms,"
        f" with it {feed * 1000:.1f} ms ({extra})"
    )


if __name__ == "__main__":
    main()
