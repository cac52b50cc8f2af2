"""Query results read as whole numpy columns: the server packs each row into the send formats of its
fields (what a binary COPY sends of them, here without lengths) and aggregates the rows into one bytea,
which `numpy.frombuffer` reads at once. Fixed-width fields only, none NULL.

Why not the binary COPY of the rows: psycopg reads a COPY one message, so one row, at a time, a
Python step each, several times the CPU of reading one bytea, while the server's aggregate costs it
little more than the COPY's messages (`bench/bench_replan.py`). The aggregate is also what lets two
backends share a read (`read_in_halves`) without a Python step per row on either connection.

The limit: a bytea holds at most 1 GB, so one statement reads at most 1 GB of packed rows (16M of the
snapshot's 64-byte charts; twice that in halves); past it the server refuses with an out-of-memory
error. The server holds the whole bytea meanwhile (64 MB at 1M charts).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from django.db import connection, transaction
from psycopg import sql

from scheduling.copy_binary import WIRE, Kind

# The send function of each kind: big-endian, of the width `WIRE` gives.
SEND: dict[Kind, str] = {
    "int8": "int8send",
    "int4": "int4send",
    "int2": "int2send",
    "bool": "boolsend",
    "timestamptz": "timestamptz_send",
}


def packed(select: str, kinds: Sequence[Kind], *, half: int | None = None) -> str:
    """The statement that reads the rows of `select` packed: one row of their number and their bytes
    (NULL for no rows). A NULL field makes its row's bytes NULL, which the aggregate skips: the count
    says so (`unpack`). With `half` (0 or 1), only the rows whose first field, an integer, is even
    (0) or odd (1). (Its `%` is written `%%`: the statement always goes with its parameters.)"""
    if "text" in kinds:
        raise ValueError("packed rows are of fixed-width fields")
    names = [f"field{number}" for number in range(len(kinds))]
    row = " || ".join(f"{SEND[kind]}(rows.{name})" for name, kind in zip(names, kinds, strict=True))
    where = "" if half is None else f" WHERE rows.{names[0]} %% 2 {'=' if half == 0 else '<>'} 0"
    return f"SELECT count(*), string_agg({row}, ''::bytea) FROM ({select}) AS rows ({', '.join(names)}){where}"  # noqa: S608


def unpack(count: int, data: bytes | None, kinds: Sequence[Kind]) -> list[npt.NDArray[Any]]:
    """The columns of `count` packed rows (see `packed`): one array a field, of the numpy type of its
    kind (int64, int32, int16, bool; a timestamptz as int64 microseconds since PostgreSQL's epoch, see
    `copy_binary.epoch_seconds`), each copied out in the machine's byte order. Refused: bytes of
    another size than `count` rows of `kinds` (a NULL field, which drops its row, or fields of other
    widths)."""
    row = np.dtype([(f"value{number}", WIRE[kind]) for number, kind in enumerate(kinds)])
    if len(data or b"") != count * row.itemsize:
        raise ValueError(f"packed rows other than {count} rows of NOT NULL fields of kinds {', '.join(kinds)}")
    records = np.frombuffer(data or b"", dtype=row)
    return [records[name].astype(row[name].newbyteorder("=")) for name in row.names or ()]


def read(select: str, params: Sequence[object], kinds: Sequence[Kind]) -> list[npt.NDArray[Any]]:
    """The rows of `select` (a SELECT of fields of `kinds`, each cast to its kind, with `params`) as
    columns (see `unpack`), in one statement on Django's connection: one view of the database."""
    with connection.cursor() as cursor:
        return unpack(*_fetch(cursor.connection, packed(select, kinds), params), kinds)


def read_in_halves(select: str, params: Sequence[object], kinds: Sequence[Kind]) -> list[npt.NDArray[Any]]:
    """As `read`, from two backends at once, each packing the rows of one half (the even, then the odd
    first fields): on two cores, about half the server's time. Steps:

    1. On Django's connection, begin a repeatable-read transaction and export its snapshot.
    2. On a connection of its own, in a thread, begin another and import that snapshot: both see the
       same database, as one statement would (a row changed meanwhile is read as it was before, on
       both sides, never half and half). It reads the odd half.
    3. Meanwhile Django's connection reads the even half and unpacks it (psycopg and numpy let go of the
       interpreter while they wait or copy, so the thread's reading goes on). If the other connection
       failed, it reads the odd half too, in its own snapshot (the one exported).
    4. The two halves' columns, end to end.

    Django's connection must not be in a transaction (its uncommitted rows would be invisible to the
    other connection)."""
    if connection.in_atomic_block:
        raise RuntimeError("read_in_halves reads one snapshot from two connections: not inside a transaction")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cursor.execute("SELECT pg_export_snapshot()")
        (snapshot,) = cursor.fetchone()
        with ThreadPoolExecutor(max_workers=1) as other:
            odd = other.submit(_read_in_snapshot, connection.get_connection_params(), snapshot, select, params, kinds)
            even = unpack(*_fetch(cursor.connection, packed(select, kinds, half=0), params), kinds)
            try:
                odd_columns = odd.result()
            except psycopg.OperationalError:
                # No second connection (the server's max_connections reached, say): the odd half here,
                # after the even one, in the same snapshot.
                odd_columns = unpack(*_fetch(cursor.connection, packed(select, kinds, half=1), params), kinds)
    return [np.concatenate(pair) for pair in zip(even, odd_columns, strict=True)]


def _read_in_snapshot(
    connection_params: dict[str, Any], snapshot: str, select: str, params: Sequence[object], kinds: Sequence[Kind]
) -> list[npt.NDArray[Any]]:
    """Step 2 of `read_in_halves`: the odd half, on a new connection, in the exported snapshot."""
    with psycopg.connect(**connection_params) as other:
        other.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        other.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
        return unpack(*_fetch(other, packed(select, kinds, half=1), params), kinds)


def _fetch(pgconnection: psycopg.Connection[Any], statement: str, params: Sequence[object]) -> tuple[int, bytes | None]:
    """The one row of a `packed` statement, its bytea read in binary (as text it would be hex)."""
    row = psycopg.Cursor(pgconnection).execute(statement, params, binary=True).fetchone()
    assert row is not None  # (an aggregate without GROUP BY: always one row)
    count, data = row
    return count, data
