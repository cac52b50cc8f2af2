"""The chart page (history with reasons and actors, retry schedule, times in UTC and relative, bands to
the second when close), the org page's drain plot, and the time formatting they share."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import strip_tags
from hypothesis import given
from hypothesis import strategies as st

from charts.drain import Finish, drain_plot
from charts.models import ChartEvent, ChartState
from charts.templatetags.portal_time import band, relative
from knobs.models import SchedulerConfig
from tests.conftest import Tenants
from tests.factories import ChartFactory, UserFactory, charts_with_bands

Browser = Callable[[Any], Client]
NOW = datetime(2026, 11, 30, 13, 50, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (40, "in 40 s"),
        (-40, "40 s ago"),
        (240, "in 4 min"),
        (-180, "3 min ago"),
        (125 * 60, "in 2 h 5 min"),
        (3 * 3600, "in 3 h"),
        (3 * 86400, "in 3 days"),
        (0, "just now"),
        (-0.4, "just now"),
    ],
)
def test_relative_times(seconds: float, text: str) -> None:
    assert relative(NOW + timedelta(seconds=seconds), NOW) == text


def test_a_band_minutes_away_is_shown_to_the_second() -> None:
    now = timezone.now()
    low, high = now + timedelta(seconds=30), now + timedelta(seconds=70)

    assert strip_tags(band(low, high)) == f"{low:%H:%M:%S}\u2013{high:%H:%M:%S} UTC"
    assert "data-seconds" in band(low, high)  # the page's script shows it in the viewer's zone to the second
    far_low, far_high = now + timedelta(hours=3), now + timedelta(hours=4)
    assert re.fullmatch(
        r"(\d{4}-\d\d-\d\d )?\d\d:\d\d\u2013(\d{4}-\d\d-\d\d )?\d\d:\d\d UTC", strip_tags(band(far_low, far_high))
    )
    assert band(None, high) == ""


def test_the_drain_plot_steps_down_one_chart_per_finish_inside_its_band() -> None:
    finishes = [
        Finish(eta=NOW + timedelta(minutes=m), low=NOW + timedelta(minutes=m - 1), high=NOW + timedelta(minutes=m + 2))
        for m in (2, 4, 6)
    ]

    plot = drain_plot(finishes=finishes, now=NOW)

    assert plot is not None
    assert (plot.total, plot.end) == (3, NOW + timedelta(minutes=8))
    line = [tuple(map(float, p.split(","))) for p in plot.line.split()]
    ys = [y for _, y in line]
    assert ys[0] == 0.0
    assert ys[-1] == plot.bottom
    assert all(a <= b for a, b in itertools.pairwise(ys))  # charts left never grows
    assert all(plot.left <= x <= plot.width for x, _ in line)
    assert len(plot.band.split()) == 2 * len(line)
    assert drain_plot(finishes=[], now=NOW) is None


def test_chart_page_shows_history_with_reasons_and_actors_as_a_tenant_may_see_them(
    tenants: Tenants, browser: Browser
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="hist-1")
    ChartEvent.objects.create(chart=chart, from_state="queued", to_state="paused", actor="user:alice", reason="hold on")
    ChartEvent.objects.create(
        chart=chart,
        from_state="paused",
        to_state="queued",
        actor="user:stella",
        reason="ops\nhost db-7 at /srv",
    )
    ChartEvent.objects.create(chart=chart, from_state="queued", to_state="dispatching", actor="system:dispatcher")

    page = browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/").content.decode()

    rows = re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>", page, re.S)
    seen = [(change, reason, actor) for _, change, reason, actor in rows]
    # The states in the customer's words ("Starting", not "dispatching").
    assert ("Queued → Paused", "hold on", "user:alice") in seen
    assert ("Paused → Queued", "\u2013", "staff") in seen  # an operator's name and reason stay internal
    assert ("Queued → Starting", "\u2013", "system:dispatcher") in seen
    assert "stella" not in page
    assert "db-7" not in page
    assert all(' UTC</time> <span class="relative">(' in when for when, *_ in rows)


def test_chart_page_shows_the_retry_schedule(tenants: Tenants, browser: Browser) -> None:
    config = SchedulerConfig.load()
    config.max_attempts = 3
    config.save()
    available = timezone.now() + timedelta(minutes=4, seconds=20)
    chart = ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        state=ChartState.RETRY_WAIT,
        attempt=1,
        available_at=available,
        last_error="TimeoutError: the renderer did not answer",
    )

    page = browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/").content.decode()

    assert "try 2 of 3 to come" in page
    assert "try 2 of 3, not before" in page
    assert f"{available:%Y-%m-%d %H:%M:%S} UTC" in page
    assert "(in 4 min)" in page
    assert "TimeoutError: the renderer did not answer" in page


def test_chart_page_band_to_the_second_when_minutes_away(tenants: Tenants, browser: Browser) -> None:
    now = timezone.now()
    low, high = now + timedelta(minutes=3, seconds=5), now + timedelta(minutes=3, seconds=50)
    chart = ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        eta=now + timedelta(minutes=3, seconds=20),
        eta_low=low,
        eta_high=high,
    )

    page = browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/").content.decode()

    assert f"likely between {low:%H:%M:%S}\u2013{high:%H:%M:%S} UTC" in strip_tags(page)


def test_held_org_chart_page_says_so(tenants: Tenants, browser: Browser) -> None:
    tenants.org_a.weight = 0
    tenants.org_a.save()
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)

    page = browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/").content.decode()

    assert "Your organisation is on hold" in page


def test_org_page_plots_the_backlog_drain(tenants: Tenants, browser: Browser) -> None:
    now = timezone.now()
    charts_with_bands(tenants.org_a, tenants.workflow, minutes=(5, 10, 20), early=2, late=5)
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, eta=now + timedelta(hours=9))
    client = browser(tenants.member_a)

    page = client.get("/portal/acme/").content.decode()
    table = client.get("/portal/acme/table/").content.decode()

    assert '<svg id="drain-plot"' in page
    assert '<svg id="drain-plot"' in table
    assert 'class="drain-line"' in page
    assert 'class="drain-band"' in page
    assert "Charts left over time: 3 now" in page  # org B's chart is not counted
    assert "style=" not in page  # the CSP allows no inline style: colours come from portal.css


def test_no_plot_without_a_prediction(tenants: Tenants, browser: Browser) -> None:
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)

    page = browser(tenants.member_a).get("/portal/acme/").content.decode()

    assert "drain-plot" not in page


def test_a_member_of_another_org_cannot_see_the_chart_page(tenants: Tenants, browser: Browser) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    stranger = UserFactory(username="sam")

    assert browser(tenants.member_b).get(f"/portal/acme/charts/{chart.pk}/").status_code == 404
    assert browser(tenants.member_b).get(f"/portal/beta/charts/{chart.pk}/").status_code == 404
    assert browser(stranger).get(f"/portal/acme/charts/{chart.pk}/").status_code == 404


def test_the_org_table_and_summary_show_bands_to_the_second_when_minutes_away(
    tenants: Tenants, browser: Browser
) -> None:
    now = timezone.now()
    low, high = now + timedelta(minutes=2, seconds=5), now + timedelta(minutes=2, seconds=40)
    ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        eta=now + timedelta(minutes=2, seconds=20),
        eta_low=low,
        eta_high=high,
    )
    tenants.org_a.clear_at, tenants.org_a.clear_low, tenants.org_a.clear_high = high, low, high
    tenants.org_a.save()

    table = browser(tenants.member_a).get("/portal/acme/table/").content.decode()

    # The chart's ETA band, and the org's clear-time band named alike in the headline and the plot's caption.
    assert table.count(f"{low:%H:%M:%S}\u2013{high:%H:%M:%S} UTC") == 3
    assert table.count("likely between") == 3
    assert "(in 2 min)" in table


@given(st.lists(st.tuples(st.integers(-600, 7200), st.integers(0, 600), st.integers(0, 600)), min_size=1, max_size=40))
def test_the_drain_line_runs_inside_its_band(offsets: list[tuple[int, int, int]]) -> None:
    finishes = [
        Finish(
            eta=NOW + timedelta(seconds=eta),
            low=NOW + timedelta(seconds=eta - early),
            high=NOW + timedelta(seconds=eta + late),
        )
        for eta, early, late in offsets
    ]

    plot = drain_plot(finishes=finishes, now=NOW)

    assert plot is not None
    line = [tuple(map(float, p.split(","))) for p in plot.line.split()]
    band = [tuple(map(float, p.split(","))) for p in plot.band.split()]
    late_edge, early_edge = band[: len(band) // 2], band[len(band) // 2 :][::-1]

    def left_at(edge: list[tuple[float, ...]], x: float) -> float:
        """The edge's y just after x (y grows as charts finish)."""
        return max(y for px, y in edge if px <= x)

    for x, _ in line:
        assert left_at(late_edge, x) <= left_at(line, x) <= left_at(early_edge, x)
    assert all(plot.left <= x <= plot.width for x, _ in band)
    assert line[-1][1] == plot.bottom


def test_chart_page_query_count_does_not_grow_with_history(
    tenants: Tenants, browser: Browser, django_assert_max_num_queries: Any
) -> None:
    SchedulerConfig.load()
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    client = browser(tenants.member_a)
    ChartEvent.objects.create(chart=chart, from_state="queued", to_state="paused", actor="user:alice")
    # Session, user, membership, chart, events, the colleagues among their actors, config, the plan's
    # freshness (the latest replan, and the replan interval: `scheduling.context_processors`), the org switcher.
    with django_assert_max_num_queries(10) as few:
        client.get(f"/portal/acme/charts/{chart.pk}/")
    for i in range(30):
        actor = ["user:alice", "user:stella", "system:dispatcher"][i % 3]
        ChartEvent.objects.create(chart=chart, from_state="paused", to_state="queued", actor=actor)

    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(client.get(f"/portal/acme/charts/{chart.pk}/").context["history"]) == 31
