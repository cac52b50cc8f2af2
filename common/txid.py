"""The writing transaction's id, stored with each row of a log that a change feed reads in commit order.

A feed cannot page on a plain id: ids are taken when rows are inserted, not when they commit, so a
reader can pass id 8 (committed) while id 7 (its transaction still open) is yet to appear, and skip
it for good. Each log row keeps `pg_current_xact_id()` instead, and a reader serves only rows of
transactions below the *horizon*, the oldest transaction still open: every transaction below it has
ended, so nothing can appear behind the reader's cursor any more (`horizon`).
"""

from __future__ import annotations

from typing import Any

from django.db import models


class CurrentTransactionId(models.Func):
    """`pg_current_xact_id()` as a bigint (an xid8 is the epoch and the xid in 64 bits, below 2**63 in
    practice), as a column's database default: the writer's code does not change."""

    template = "(pg_current_xact_id()::text::bigint)"
    output_field = models.BigIntegerField()

    def __init__(self, **extra: Any) -> None:
        super().__init__(**extra)


# The oldest transaction open anywhere in the database server (every database's).
HORIZON_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
# The snapshot's xmax (one past the latest ended transaction: every id below it was assigned before
# this statement), and whether this role sees every session's transaction in pg_stat_activity.
NEXT_XID_SQL = (
    "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
    " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
    " OR pg_has_role(current_user, 'pg_read_all_stats', 'MEMBER')"
)
# The (32-bit) ids of the transactions open in this database, prepared ones included.
OPEN_HERE_SQL = (
    "SELECT backend_xid::text::bigint FROM pg_stat_activity"
    " WHERE datname = current_database() AND backend_xid IS NOT NULL"
    " UNION ALL SELECT transaction::text::bigint FROM pg_prepared_xacts WHERE database = current_database()"
)


def horizon(cursor: Any) -> int:
    """The oldest transaction still open in this database (or the snapshot's xmax, if none is). Steps:

    1. Read the snapshot's xmax first: every id below it was assigned before, and PostgreSQL
       publishes an id in its session's entry before the id counter moves past it.
    2. Then list the transactions open in this database (`pg_stat_activity`, whose copy cached in
       a transaction is dropped first, and the prepared ones), widened to 64 bits near xmax; the
       horizon is the least of them and xmax. One that ends meanwhile is only counted as open:
       the horizon is then lower than it could be, never higher. One that began after step 1 has
       an id of xmax or more: its rows are not below the horizon either way.
    3. A role that cannot see other roles' sessions gets the server-wide horizon (`HORIZON_SQL`):
       later while any database's transaction is open, but never past an open one of this database.
    Transactions of other databases never hold this one's feed back.
    """
    cursor.execute(NEXT_XID_SQL)
    xmax, sees_every_session = cursor.fetchone()
    if not sees_every_session:
        cursor.execute(HORIZON_SQL)
        return int(cursor.fetchone()[0])
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute(OPEN_HERE_SQL)
    return min([int(xmax), *(_widened(int(xid), int(xmax)) for (xid,) in cursor.fetchall())])


def _widened(xid: int, near: int) -> int:
    """A 32-bit transaction id as the 64-bit one it is, given a 64-bit id near it (within 2**31, as
    every open transaction is: PostgreSQL stops before wraparound). It may lie on either side."""
    offset = (xid - near) % 2**32
    return near + (offset - 2**32 if offset >= 2**31 else offset)
