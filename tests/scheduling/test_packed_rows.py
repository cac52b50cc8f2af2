"""The packed-rows reader: what it makes of the server's packed rows is what the text path reads,
times as `date_part`; in one statement or in halves from two backends, which see one snapshot; and a
NULL field is refused, never a row silently dropped."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from django.db import connection

from scheduling import copy_binary, packed_rows

pytestmark = pytest.mark.django_db

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
    (10, 7, 7, 7, true, '294276-12-31 23:59:59.999999+00'),
    (-11, 8, 8, 8, false, '2026-01-01 00:00:00+00')
"""
TRICKY_KINDS: list[copy_binary.Kind] = ["int8", "int8", "int2", "int4", "bool", "timestamptz"]
TRICKY_SELECT = "SELECT n, big, small, plain, flag, COALESCE(at, '-infinity') FROM tricky"
TRICKY_COLUMNS = "(n bigint, big bigint, small smallint, plain integer, flag boolean, at timestamptz)"


@pytest.fixture
def tricky() -> None:
    """The tricky rows in a table `tricky` (temporary: one test's connection sees it)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE tricky {TRICKY_COLUMNS}")
        cursor.execute(f"INSERT INTO tricky VALUES {TRICKY_ROWS}")  # noqa: S608


@pytest.fixture
def committed_tricky() -> Iterator[None]:
    """The tricky rows in a table `tricky` that every connection sees (a test outside a transaction)."""
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE tricky {TRICKY_COLUMNS}")
        cursor.execute(f"INSERT INTO tricky VALUES {TRICKY_ROWS}")  # noqa: S608
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE tricky")


def _text_path() -> list[tuple[Any, ...]]:
    """The tricky rows as the text path reads them, times as date_part's seconds (to the bit: hex)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n, big, small, plain, flag, date_part('epoch', COALESCE(at, '-infinity')) FROM tricky")
        return sorted((*values, seconds.hex()) for *values, seconds in cursor.fetchall())


def _as_rows(columns: list[npt.NDArray[Any]]) -> list[tuple[Any, ...]]:
    *integers, at = columns
    seconds = copy_binary.epoch_seconds(at).tolist()
    return sorted(
        (*values, second.hex()) for *values, second in zip(*(a.tolist() for a in integers), seconds, strict=True)
    )


def test_the_reader_gives_what_the_text_path_reads_of_tricky_rows(tricky: None) -> None:
    columns = packed_rows.read(TRICKY_SELECT, [], TRICKY_KINDS)
    assert [array.dtype for array in columns] == [np.int64, np.int64, np.int16, np.int32, np.bool_, np.int64]
    assert _as_rows(columns) == _text_path()  # every time to the bit, as date_part makes it (infinities too)


@pytest.mark.django_db(transaction=True)
def test_the_halves_are_the_whole_of_tricky_rows(committed_tricky: None) -> None:
    columns = packed_rows.read_in_halves(TRICKY_SELECT, [], TRICKY_KINDS)
    assert [array.dtype for array in columns] == [np.int64, np.int64, np.int16, np.int32, np.bool_, np.int64]
    assert _as_rows(columns) == _text_path()  # a negative first field too: in the odd half
    assert len(columns[0]) == 11


@pytest.mark.django_db(transaction=True)
def test_the_two_halves_read_one_snapshot(committed_tricky: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row changed after the read has begun is read as it was, in both halves: the second backend
    imports the first one's snapshot (without it, it would read the odd rows after the change)."""
    read_odd_half = packed_rows._read_in_snapshot

    def a_writer_commits_meanwhile(*args: Any) -> list[npt.NDArray[Any]]:
        with psycopg.connect(**connection.get_connection_params(), autocommit=True) as writer:
            writer.execute("UPDATE tricky SET small = 99")
        return read_odd_half(*args)

    monkeypatch.setattr(packed_rows, "_read_in_snapshot", a_writer_commits_meanwhile)
    columns = packed_rows.read_in_halves(TRICKY_SELECT, [], TRICKY_KINDS)
    assert sorted(columns[2].tolist()) == [-32768, *range(9), 32767]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tricky WHERE small = 99")
        assert cursor.fetchone() == (11,)  # (the change was made, and committed)


@pytest.mark.django_db(transaction=True)
def test_without_a_second_connection_both_halves_are_read_on_the_first(
    committed_tricky: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_connection_left(*args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        raise psycopg.OperationalError("FATAL:  sorry, too many clients already")

    monkeypatch.setattr(packed_rows.psycopg, "connect", no_connection_left)
    columns = packed_rows.read_in_halves(TRICKY_SELECT, [], TRICKY_KINDS)
    assert _as_rows(columns) == _text_path()


def test_the_halves_are_refused_inside_a_transaction(tricky: None) -> None:
    with pytest.raises(RuntimeError, match="not inside a transaction"):
        packed_rows.read_in_halves(TRICKY_SELECT, [], TRICKY_KINDS)


def test_no_rows_are_empty_columns(tricky: None) -> None:
    columns = packed_rows.read(TRICKY_SELECT + " WHERE false", [], TRICKY_KINDS)
    assert [len(array) for array in columns] == [0] * len(TRICKY_KINDS)
    assert [array.dtype for array in columns] == [np.int64, np.int64, np.int16, np.int32, np.bool_, np.int64]


@pytest.mark.django_db(transaction=True)
def test_no_rows_in_halves_are_empty_columns(committed_tricky: None) -> None:
    columns = packed_rows.read_in_halves(TRICKY_SELECT + " WHERE false", [], TRICKY_KINDS)
    assert [len(array) for array in columns] == [0] * len(TRICKY_KINDS)


@pytest.mark.django_db(transaction=True)
def test_parameters_are_bound_in_either_half(committed_tricky: None) -> None:
    columns = packed_rows.read_in_halves(TRICKY_SELECT + " WHERE n > %s AND small < %s", [3, 7], TRICKY_KINDS)
    assert sorted(columns[0].tolist()) == [4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    "select",
    [
        "SELECT n, big, small, plain, flag, at FROM tricky",  # a NULL time: its row would be dropped
        "SELECT n, big, small, plain, flag, at FROM tricky WHERE n = 2",  # in the only row
        "SELECT n, NULL::bigint, small, plain, flag, COALESCE(at, 'epoch') FROM tricky",  # in every row
    ],
)
def test_a_null_field_is_refused(tricky: None, select: str) -> None:
    with pytest.raises(ValueError, match="packed rows other than"):
        packed_rows.read(select, [], TRICKY_KINDS)


def test_bytes_of_another_size_are_refused() -> None:
    row = np.dtype([("n", ">i8"), ("flag", "?")])
    data = np.zeros(3, dtype=row).tobytes()
    assert [len(column) for column in packed_rows.unpack(3, data, ["int8", "bool"])] == [3, 3]
    for count, wrong in [(2, data), (3, data[:-1]), (4, data), (1, None)]:
        with pytest.raises(ValueError, match="packed rows other than"):
            packed_rows.unpack(count, wrong, ["int8", "bool"])
    with pytest.raises(ValueError, match="packed rows other than"):
        packed_rows.unpack(3, data, ["int8", "int2"])  # a field of another width


def test_a_text_field_is_refused() -> None:
    with pytest.raises(ValueError, match="fixed-width"):
        packed_rows.packed("SELECT 'a'::text", ["text"])


def test_what_the_writer_writes_is_read_back() -> None:
    rng = random.Random(5)
    seconds = [rng.uniform(-1e10, 1e10) for _ in range(300)]
    written = [
        copy_binary.integers([rng.randrange(-(2**63), 2**63) for _ in seconds]),
        copy_binary.integers([rng.randrange(-(2**31), 2**31) for _ in seconds], kind="int4"),
        copy_binary.timestamps(seconds),
    ]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE copied (big bigint, plain integer, at timestamptz)")
        with cursor.connection.cursor().copy("COPY copied FROM STDIN (FORMAT binary)") as copy:
            copy.write(copy_binary.encode(written))
    read = packed_rows.read("SELECT big, plain, at FROM copied", [], ["int8", "int4", "timestamptz"])
    assert sorted(zip(*(column.tolist() for column in read), strict=True)) == sorted(
        zip(*(column.values.tolist() for column in written), strict=True)
    )
