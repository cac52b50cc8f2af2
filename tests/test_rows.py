"""`common.rows.Layout`: a statement's row read by named parts, never by counted columns."""

from __future__ import annotations

import pytest

from charts.selectors import CHART_ROW
from charts.status_api import STATUS_ROW
from common import rows
from orgs.access import TOKEN_ROW
from orgs.models import Org


def test_a_layout_gives_each_part_its_own_columns_and_values() -> None:
    layout = rows.Layout([("org", rows.model_columns(Org, "o")), ("role", ['m."role"'])])
    width = len(Org._meta.concrete_fields)
    row = (*range(width), "admin")
    assert layout.sql == f'{rows.columns(Org, "o")}, m."role"'
    assert layout.part(row, "org") == tuple(range(width))
    assert layout.part(row, "role") == ("admin",)


def test_layouts_add_up_and_keep_their_parts_where_the_statement_reads_them() -> None:
    """The status read's one statement is the token's row, then the chart's: each part is found by
    its name wherever the sum puts it."""
    assert STATUS_ROW.sql == f"{TOKEN_ROW.sql}, {CHART_ROW.sql}"
    row = tuple(range(len(STATUS_ROW.sql.split(", "))))
    token_width = len(TOKEN_ROW.sql.split(", "))
    assert STATUS_ROW.part(row, "role") == (token_width - 1,)
    assert STATUS_ROW.part(row, "chart")[0] == token_width
    assert STATUS_ROW.part(row, "workflow")[-1] == row[-1]


def test_two_parts_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two parts named 'chart'"):
        CHART_ROW + CHART_ROW
