"""Model instances from one hand-written statement, for the few reads on the API's hot path.

The ORM builds and compiles a query on every call, which for a one-row read by key costs more than
PostgreSQL's answer (bench/bench_api.py). These helpers let such a read be one constant statement
written from the models' own columns, and give back ordinary model instances: every concrete field
loaded and converted as the ORM would (`from_db_value`, e.g. JSON), so nothing is deferred.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


def columns(model: type[models.Model], alias: str) -> str:
    """The model's concrete columns under a table alias, in field order: `t."id", t."name", ...`."""
    return ", ".join(model_columns(model, alias))


def model_columns(model: type[models.Model], alias: str) -> list[str]:
    """The model's concrete columns under a table alias, in field order, one expression each."""
    return [f'{alias}."{field.column}"' for field in model._meta.concrete_fields]


class Layout:
    """A statement's row as named parts, in order, each a run of columns (a model's, by
    `model_columns`, or plain expressions): `sql` is the SELECT list, `part` a part's values in a
    row, so that no reader counts columns. Layouts add up (`token + chart`) when one statement
    reads both; their part names must differ."""

    __slots__ = ("_slices", "columns")

    def __init__(self, parts: Sequence[tuple[str, Sequence[str]]]) -> None:
        self.columns: tuple[tuple[str, tuple[str, ...]], ...] = tuple((name, tuple(sql)) for name, sql in parts)
        self._slices: dict[str, slice] = {}
        begin = 0
        for name, sql in self.columns:
            if name in self._slices:
                raise ValueError(f"two parts named {name!r}")
            self._slices[name] = slice(begin, begin + len(sql))
            begin += len(sql)

    def __add__(self, other: Layout) -> Layout:
        return Layout([*self.columns, *other.columns])

    @property
    def sql(self) -> str:
        return ", ".join(column for _, sql in self.columns for column in sql)

    def part(self, row: Sequence[Any], name: str) -> Sequence[Any]:
        """The values of part `name` in `row` (a row of this layout's `sql`)."""
        return row[self._slices[name]]


def from_row(model: type[M], values: Sequence[Any]) -> M:
    """An instance of `model` from the values of `columns(model, ...)`, as the ORM would load it."""
    fields = model._meta.concrete_fields
    converted = [
        field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") else value
        for field, value in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [field.attname for field in fields], converted)


# Row locks `instances_where` takes, weakest last: FOR UPDATE excludes every other lock of the row;
# FOR KEY SHARE only FOR UPDATE (and deleting the row), not other KEY SHARE holders nor plain UPDATEs.
RowLock = Literal["FOR UPDATE", "FOR KEY SHARE"]


def instances_where(model: type[M], condition: str, params: Sequence[Any], *, lock: RowLock | None = None) -> list[M]:
    """The instances of `model` whose rows meet `condition` (a constant SQL condition on the alias `t`,
    values as parameters), their rows locked if asked: one statement, built without the ORM."""
    sql = f'SELECT {columns(model, "t")} FROM "{model._meta.db_table}" t WHERE {condition}'  # noqa: S608 (names from the model, a constant condition; values are parameters)
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} {lock}" if lock else sql, params)
        return [from_row(model, row) for row in cursor.fetchall()]


def fetch_one(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)
