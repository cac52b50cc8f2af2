"""The writing transaction's id, stored with each row of a log that a change feed reads in commit order.

A feed cannot page on a plain id: ids are taken when rows are inserted, not when they commit, so a
reader can pass id 8 (committed) while id 7 (its transaction still open) is yet to appear, and skip
it for good. Each log row keeps `pg_current_xact_id()` instead, and a reader serves only rows of
transactions older than its snapshot's xmin (`pg_snapshot_xmin(pg_current_snapshot())`): every such
transaction has ended, so nothing can appear behind the reader's cursor any more.
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


HORIZON_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
