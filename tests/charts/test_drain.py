"""The drain plot's numbers, its table: at each tick of the time axis the charts left by the ETAs (the
line) and by the early and the late finishes (the band), read off the same finishes the plot draws."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from django.test import Client
from django.utils.html import strip_tags

from charts.drain import Finish, drain_plot
from tests.conftest import Tenants
from tests.factories import charts_with_bands

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


def test_each_tick_counts_the_charts_left_by_the_line_and_by_the_bands_edges() -> None:
    finishes = [
        Finish(eta=at(2), low=at(1), high=at(3)),
        Finish(eta=at(5), low=at(4), high=at(7)),
        Finish(eta=at(6), low=at(3), high=at(8)),
    ]
    plot = drain_plot(finishes=finishes, now=NOW)
    assert plot is not None

    # The axis runs to the latest late finish (8 min), in four steps of 2 min.
    assert [step.at for step in plot.steps] == [at(0), at(2), at(4), at(6), at(8)]
    assert [step.median for step in plot.steps] == [3, 2, 2, 0, 0]
    assert [step.early for step in plot.steps] == [3, 2, 0, 0, 0]
    assert [step.late for step in plot.steps] == [3, 3, 2, 2, 0]
    assert [step.at for step in plot.steps] == [tick.at for tick in plot.ticks]


def test_a_finish_already_past_is_counted_now_as_the_plot_starts() -> None:
    plot = drain_plot(finishes=[Finish(eta=at(-1), low=at(-2), high=at(3))], now=NOW)
    assert plot is not None
    assert (plot.steps[0].median, plot.steps[0].early, plot.steps[0].late) == (1, 1, 1)
    assert (plot.steps[1].median, plot.steps[1].early, plot.steps[1].late) == (0, 0, 1)


def test_the_org_page_gives_the_plots_numbers_as_a_table(tenants: Tenants) -> None:
    charts_with_bands(tenants.org_a, minutes=(10, 20), early=5, late=20)
    client = Client()
    client.force_login(tenants.member_a)
    part = client.get("/portal/acme/table/").content.decode()

    numbers = re.search(r'<details class="drain-numbers" id="drain-numbers">(.*?)</details>', part, re.S)
    assert numbers is not None
    assert "<summary>The plot's numbers, as a table</summary>" in numbers[1]
    rows = re.findall(r"<tr><th scope=\"row\">(.*?)</th><td>(\d+)</td><td>([\d\u2013]+)</td></tr>", numbers[1])
    assert len(rows) == 5
    assert strip_tags(rows[0][0]).startswith("now, ")
    assert all(re.search(r'<time datetime="[^"]+" data-clock-only>\d\d:\d\d:\d\d UTC</time>', row[0]) for row in rows)
    assert rows[0][1:] == ("2", "2")
    assert rows[-1][1:] == ("0", "0")
    assert "The table under it gives the plot's numbers." in part
