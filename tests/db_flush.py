"""Pytest plugin: the test database is emptied with DELETE, not TRUNCATE (enabled in the root conftest).

After every transactional test (`transactional_db`, `django_db(transaction=True)`) Django's `flush`
empties every table, then its post_migrate signal writes the content types and permissions back.
Its PostgreSQL statement is one `TRUNCATE` of all 28 tables, which gives every table, index and TOAST
table a new file and syncs them at commit: about a second here, paid after each of some ninety tests.
A `DELETE` of the few rows a test wrote takes milliseconds.

- The order of the DELETEs does not matter: `execute_sql_flush` runs them in one transaction and
  every foreign key Django creates is `DEFERRABLE INITIALLY DEFERRED`, checked at its commit, when
  every row is gone.
- The content types and permissions are kept: post_migrate would write the same rows back (under new
  ids), a hundred inserts after each test; finding them all there, it writes nothing. No test adds
  any of its own.
- Sequences are left alone, as the TRUNCATE left them. A flush that must reset sequences or cascade
  to tables outside its list (`reset_sequences`, `available_apps`) keeps Django's TRUNCATE.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db.backends.postgresql.operations import DatabaseOperations

KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})

_truncate = DatabaseOperations.sql_flush


def sql_flush_by_delete(
    self: DatabaseOperations,
    style: Any,
    tables: list[str],
    *,
    reset_sequences: bool = False,
    allow_cascade: bool = False,
) -> list[str]:
    """`sql_flush` as one DELETE per table but the kept ones (see the module doc)."""
    if reset_sequences or allow_cascade:
        return _truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return [
        f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
        for table in tables
        if table not in KEPT_TABLES
    ]


@pytest.fixture(scope="session", autouse=True)
def flush_by_delete() -> Iterator[None]:
    DatabaseOperations.sql_flush = sql_flush_by_delete  # type: ignore[method-assign]
    yield
    DatabaseOperations.sql_flush = _truncate  # type: ignore[method-assign]
