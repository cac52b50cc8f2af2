"""The binary COPY writer: what PostgreSQL reads from it is what was given, times as `to_timestamp`.
The reader: what it makes of PostgreSQL's stream is what the text path reads, times as `date_part`."""

from __future__ import annotations

import random

import numpy as np
import pytest
from django.db import connection

from scheduling import copy_binary

pytestmark = pytest.mark.django_db


def _copy(columns: dict[str, copy_binary.Column], *, blocks: int = 1) -> None:
    """COPY the rows of `columns` into a table `copied`, as one stream of `blocks` blocks of rows."""
    rows = len(next(iter(columns.values())).values)
    size = -(-rows // blocks) or 1
    parts = [[column.rows(slice(start, start + size)) for column in columns.values()] for start in range(0, rows, size)]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE copied (id bigint, place integer, at timestamptz, label text)")
        with cursor.connection.cursor().copy(f"COPY copied ({', '.join(columns)}) FROM STDIN (FORMAT binary)") as copy:
            if blocks == 1:
                copy.write(copy_binary.encode(list(columns.values())))
            else:
                for chunk in copy_binary.chunks(parts):
                    copy.write(chunk)


def test_times_are_exactly_what_to_timestamp_makes_of_the_seconds() -> None:
    rng = random.Random(3)
    seconds: list[float | None] = [
        1_700_000_000,  # a whole time, as the core keeps some
        1_700_000_000.0000005,  # half a microsecond: rounded half to even, as PostgreSQL does
        1_700_000_000.0000015,
        946_684_800.0,  # PostgreSQL's own epoch
        0.25,
        -12.5,  # before 1970
        None,
        *(rng.uniform(1.6e9, 1.9e9) for _ in range(500)),
    ]
    _copy({"id": copy_binary.integers(list(range(len(seconds)))), "at": copy_binary.timestamps(seconds)})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE c.at IS NOT DISTINCT FROM to_timestamp(s.seconds))"
            " FROM copied c JOIN unnest(%s::float8[]) WITH ORDINALITY AS s(seconds, n) ON s.n - 1 = c.id",
            [[None if value is None else float(value) for value in seconds]],
        )
        assert cursor.fetchone() == (len(seconds), len(seconds))


@pytest.mark.parametrize("blocks", [1, 3])  # one block of rows, or several with layouts of their own
def test_nulls_integers_and_texts_arrive_row_by_row_whatever_their_layout(blocks: int) -> None:
    ids = list(range(1, 9))
    places = [0, None, 2, 3, None, 2**31 - 1, 6, None]
    labels: list[str | None] = ["budget", "", "turn", "budget", None, "org_cap", "turn", "budget"]
    times = [10.0, 20.0, None, None, 50.0, 60.0, None, 80.0]
    _copy(
        {
            "id": copy_binary.integers([2**62 + chart for chart in ids]),
            "place": copy_binary.integers(places, kind="int4"),
            "at": copy_binary.timestamps(times),
            "label": copy_binary.texts(labels),
        },
        blocks=blocks,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT id - %s, place, EXTRACT(EPOCH FROM at)::float8, label FROM copied ORDER BY id", [2**62])
        texts = [label or "" for label in labels]  # None is written as the empty text
        assert cursor.fetchall() == list(zip(ids, places, times, texts, strict=True))


def test_no_rows_is_an_empty_copy() -> None:
    _copy({"id": copy_binary.integers([]), "at": copy_binary.timestamps([])})
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM copied")
        assert cursor.fetchone() == (0,)


# Rows at the edges of every kind the reader takes; `at` NULL in one row, read as -infinity.
TRICKY_ROWS = """
    (1, 9223372036854775807, 32767, 2147483647, true, '2026-11-30 23:59:59.999999+00'),
    (2, -9223372036854775808, -32768, -2147483648, false, NULL),
    (3, 0, 0, 0, false, '-infinity'),
    (4, 1, 1, -1, true, 'infinity'),
    (5, 2, 2, 2, true, '4713-01-01 00:00:00+00 BC'),
    (6, 3, 3, 3, false, '1969-12-31 23:59:59.999999+00'),
    (7, 4, 4, 4, true, '1970-01-01 00:00:00+00'),
    (8, 5, 5, 5, false, '2000-01-01 00:00:00.000001+00'),
    (9, 6, 6, 6, true, '200000-06-15 12:34:56.789012+00'),
    (10, 7, 7, 7, true, '294276-12-31 23:59:59.999999+00')
"""
TRICKY_KINDS: list[copy_binary.Kind] = ["int8", "int8", "int2", "int4", "bool", "timestamptz"]


def _tricky_table() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE tricky"
            " (n bigint, big bigint, small smallint, plain integer, flag boolean, at timestamptz)"
        )
        cursor.execute(f"INSERT INTO tricky VALUES {TRICKY_ROWS}")  # noqa: S608
    return "SELECT n, big, small, plain, flag, COALESCE(at, '-infinity') FROM tricky"


def test_the_reader_gives_what_the_text_path_reads_of_tricky_rows() -> None:
    query = _tricky_table()
    with connection.cursor() as cursor:
        columns = copy_binary.copy_out(cursor.connection.cursor(), query, [], TRICKY_KINDS)
        cursor.execute("SELECT n, big, small, plain, flag, date_part('epoch', COALESCE(at, '-infinity')) FROM tricky")
        text = cursor.fetchall()
    *integers, at = columns
    assert [array.dtype for array in columns] == [np.int64, np.int64, np.int16, np.int32, np.bool_, np.int64]
    seconds = copy_binary.epoch_seconds(at).tolist()
    read = zip(*(array.tolist() for array in integers), seconds, strict=True)
    # Every time to the bit, as date_part makes it (infinities included).
    assert sorted((*values, second.hex()) for *values, second in read) == sorted(
        (*values, second.hex()) for *values, second in text
    )


def test_the_reader_reads_what_the_writer_writes() -> None:
    rng = random.Random(5)
    seconds = [rng.uniform(-1e10, 1e10) for _ in range(300)]
    written = [
        copy_binary.integers([rng.randrange(-(2**63), 2**63) for _ in seconds]),
        copy_binary.integers([rng.randrange(-(2**31), 2**31) for _ in seconds], kind="int4"),
        copy_binary.timestamps(seconds),
    ]
    read = copy_binary.decode(copy_binary.encode(written), ["int8", "int4", "timestamptz"])
    for column, values in zip(written, read, strict=True):
        assert values.tolist() == column.values.tolist()


def test_no_rows_are_empty_columns() -> None:
    query = _tricky_table() + " WHERE false"
    with connection.cursor() as cursor:
        columns = copy_binary.copy_out(cursor.connection.cursor(), query, [], TRICKY_KINDS)
    assert [len(array) for array in columns] == [0] * len(TRICKY_KINDS)


@pytest.mark.parametrize(
    ("query", "kinds"),
    [
        ("SELECT n, big, small, plain, flag, at FROM tricky", TRICKY_KINDS),  # a NULL time
        ("SELECT n, big, small, plain, flag, at FROM tricky WHERE n = 2", TRICKY_KINDS),  # in the only row
        ("SELECT n, big, big, plain, flag, COALESCE(at, 'epoch') FROM tricky", TRICKY_KINDS),  # a wider field
        ("SELECT n FROM tricky", ["int4"]),  # every row of another width
        ("SELECT n, plain FROM tricky", ["int8"]),  # a field more
    ],
)
def test_a_null_or_a_field_of_another_kind_is_refused(query: str, kinds: list[copy_binary.Kind]) -> None:
    _tricky_table()
    with connection.cursor() as cursor, pytest.raises(ValueError, match="binary COPY rows other than"):
        copy_binary.copy_out(cursor.connection.cursor(), query, [], kinds)


def test_what_is_not_a_binary_copy_stream_is_refused() -> None:
    with pytest.raises(ValueError, match="not a binary COPY stream"):
        copy_binary.decode(b"1\t2\n", ["int8"])
    with pytest.raises(ValueError, match="without its trailer"):
        copy_binary.decode(copy_binary.HEADER + b"\x00\x00", ["int8"])
