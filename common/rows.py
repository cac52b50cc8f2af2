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
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def width(model: type[models.Model]) -> int:
    """How many values `columns` selects."""
    return len(model._meta.concrete_fields)


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
