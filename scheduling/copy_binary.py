"""PostgreSQL's binary COPY format, written from whole columns with numpy (the replan's plan table);
and the send formats of fixed-width values (`WIRE`, `epoch_seconds`), which `scheduling.packed_rows`
reads back into whole columns (the snapshot's charts).

A binary COPY stream is a header, then each row as a 16-bit field count followed by each field as a
32-bit length (-1: NULL) and that many bytes, then a 16-bit -1. Rows whose NULLs and text values fall
the same way share one layout, so the rows of each layout are written as one numpy record array: a
handful of arrays whatever the number of rows, and no Python step per row. Times go as PostgreSQL
stores them (microseconds since 2000-01-01), rounded as `to_timestamp` rounds, so no conversion is
left for the server.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
# 2000-01-01 00:00 UTC, PostgreSQL's epoch, in seconds since the Unix epoch.
POSTGRES_EPOCH = 946_684_800.0

Kind = Literal["int8", "int4", "int2", "bool", "timestamptz", "float8", "text"]
# The send format of each fixed-width kind, as a numpy type.
WIRE = {"int8": ">i8", "int4": ">i4", "int2": ">i2", "bool": "?", "timestamptz": ">i8", "float8": ">f8"}
# Microseconds from PostgreSQL's epoch to the Unix epoch (a timestamptz's send format counts from its own).
UNIX_EPOCH_MICROS = -946_684_800_000_000


@dataclass(frozen=True)
class Column:
    """One column of rows to COPY: `values` aligned with the rows, `null` marks the NULLs (or None:
    none). A text column holds codes into `labels` (the few distinct values it takes)."""

    kind: Kind
    values: npt.NDArray[np.int64] | npt.NDArray[np.float64]  # floats for float8 only
    null: npt.NDArray[np.bool_] | None = None
    labels: tuple[bytes, ...] = ()

    def rows(self, block: slice) -> Column:
        """The same column for the rows of `block` alone (views of its arrays, no copy)."""
        return Column(self.kind, self.values[block], None if self.null is None else self.null[block], self.labels)


def integers(values: Sequence[int | None], *, kind: Literal["int8", "int4"] = "int8") -> Column:
    """A bigint (or integer) column; None is NULL. (Never through floats: a bigint does not fit one.)"""
    try:
        return Column(kind, np.array(values, dtype=np.int64))
    except TypeError:
        null = _nulls(values)
        array = np.array(values, dtype=object)
        array[null] = 0
        return Column(kind, array.astype(np.int64), null)


def timestamps(seconds: Sequence[float | None] | npt.NDArray[np.float64]) -> Column:
    """A timestamptz column from seconds since the Unix epoch, exactly as `to_timestamp(seconds)`
    (PostgreSQL subtracts its epoch, then rounds to the microsecond, half to even: so does `rint`);
    None or NaN is NULL."""
    array = _floats(seconds)
    null = np.isnan(array)
    micros = np.rint((np.where(null, POSTGRES_EPOCH, array) - POSTGRES_EPOCH) * 1e6).astype(np.int64)
    return Column("timestamptz", micros, null if null.any() else None)


def floats(values: Sequence[float | None] | npt.NDArray[np.float64]) -> Column:
    """A float8 column; None or NaN is NULL."""
    array = _floats(values)
    null = np.isnan(array)
    return Column("float8", np.where(null, 0.0, array), null if null.any() else None)


def texts(values: Sequence[str | None]) -> Column:
    """A text column of few distinct values, None written as the empty text (never NULL)."""
    labels = list(dict.fromkeys(values))
    code = {label: index for index, label in enumerate(labels)}
    array = np.fromiter(map(code.__getitem__, values), dtype=np.int64, count=len(values))
    return Column("text", array, None, tuple((label or "").encode() for label in labels))


def _floats(values: Sequence[float | None] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The values as floats, None as NaN (each way at C speed)."""
    if isinstance(values, np.ndarray):
        return values
    try:
        return np.array(values, dtype=np.float64)
    except TypeError:
        array = np.array(values, dtype=object)
        array[_nulls(values)] = math.nan
        return array.astype(np.float64)


def _nulls(values: Sequence[object]) -> npt.NDArray[np.bool_]:
    return np.array([value is None for value in values], dtype=np.bool_)


def encode(columns: Sequence[Column]) -> bytes:
    """The whole COPY stream (`COPY table (columns) FROM STDIN (FORMAT binary)`) of the rows, as one
    bytes object (`chunks` of one block, joined)."""
    return b"".join(chunks([columns]))


def chunks(blocks: Iterable[Sequence[Column]]) -> Iterator[bytes | memoryview]:
    """The COPY stream of the rows of `blocks` (each a block of rows, given as its columns) in pieces,
    for `Copy.write` one by one. Steps:

    1. The header.
    2. For each block, as the caller asks for it (so a block can be worked out while the server reads
       the one before), give each row its layout: which of its fields are NULL, and which label each
       text field has. For each layout, build one record array of its rows (field count, then each
       field's length and value; a NULL field is its length, -1, alone) and yield a view of its
       memory: nothing is copied to bytes, nor joined, nor sliced for libpq (less CPU than one bytes
       object: `bench/bench_replan.py`). Rows come out grouped by layout
       within their block: COPY keeps no order, and a table has none.
    3. The trailer.
    """
    yield HEADER
    for columns in blocks:
        yield from _block(columns)
    yield TRAILER


def _block(columns: Sequence[Column]) -> Iterator[memoryview]:
    """Step 2 of `chunks` for one block: its rows as one record array per layout."""
    rows = len(columns[0].values) if columns else 0
    layout = np.zeros(rows, dtype=np.int64)
    for column in columns:
        choices = len(column.labels) + 1 if column.kind == "text" else 2
        part = column.values if column.kind == "text" else column.null
        if part is not None:
            layout = layout * choices + cast("npt.NDArray[np.int64]", part)  # text codes, or NULL marks
    order = np.argsort(layout, kind="stable")
    _, starts = np.unique(layout[order], return_index=True)
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else rows
        yield _records(columns, order[start:end]).view(np.uint8).data


def _records(columns: Sequence[Column], members: npt.NDArray[np.intp]) -> npt.NDArray[np.void]:
    """The rows `members`, which share one layout, as one record array."""
    first = members[0]
    fields: list[tuple[str, str]] = [("count", ">i2")]
    values: dict[str, object] = {"count": len(columns)}
    for number, column in enumerate(columns):
        length, value = f"l{number}", f"v{number}"
        if column.null is not None and column.null[first]:
            fields.append((length, ">i4"))
            values[length] = -1
        elif column.kind == "text":
            label = column.labels[column.values[first]]
            fields += [(length, ">i4"), (value, f"S{len(label)}")] if label else [(length, ">i4")]
            values[length] = len(label)
            if label:
                values[value] = label
        else:
            fields += [(length, ">i4"), (value, WIRE[column.kind])]
            values[length] = np.dtype(WIRE[column.kind]).itemsize
            values[value] = column.values[members]
    records = np.empty(len(members), dtype=np.dtype(fields))
    for name, field_values in values.items():
        records[name] = field_values
    return records


def epoch_seconds(micros: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Seconds since the Unix epoch of timestamptz values (microseconds since PostgreSQL's epoch), as
    `date_part('epoch', ...)` computes them, to the bit: the microseconds since the Unix epoch as an
    int64, then as a float8, then divided by 10^6 (from the float when the int64 would overflow, as it
    does). -infinity and infinity give -inf and inf."""
    safe = micros < np.iinfo(np.int64).max + UNIX_EPOCH_MICROS
    if safe.all():  # (always but for a time in the year 294,247 or infinity)
        seconds = (micros - UNIX_EPOCH_MICROS).astype(np.float64) / 1e6
    else:
        since_unix = (np.where(safe, micros, 0) - UNIX_EPOCH_MICROS).astype(np.float64)
        seconds = np.where(safe, since_unix, micros.astype(np.float64) - UNIX_EPOCH_MICROS) / 1e6
    seconds[micros == np.iinfo(np.int64).min] = -np.inf
    seconds[micros == np.iinfo(np.int64).max] = np.inf
    return seconds
