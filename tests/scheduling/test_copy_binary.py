"""The binary COPY writer: what PostgreSQL reads from it is what was given, times as `to_timestamp`.
(Its values read back by `packed_rows`: tests/scheduling/test_packed_rows.py.)"""

from __future__ import annotations

import random

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


def test_floats_arrive_to_the_bit_and_nan_or_none_as_null() -> None:
    values: list[float | None] = [0.0, -1.5, 63.25, 1e-300, 1.7976931348623157e308, None, float("nan"), 1 / 3]
    columns = [copy_binary.integers(list(range(len(values)))), copy_binary.floats(values)]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE floats (id bigint, value float8)")
        with cursor.connection.cursor().copy("COPY floats (id, value) FROM STDIN (FORMAT binary)") as copy:
            copy.write(copy_binary.encode(columns))
        cursor.execute("SELECT value FROM floats ORDER BY id")
        read = [value for (value,) in cursor.fetchall()]
    assert read == [None if value is None or value != value else value for value in values]
