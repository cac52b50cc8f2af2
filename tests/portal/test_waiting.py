"""Why a chart waits, in the customer's words: on its page and in the org's table."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import UTC, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from charts.models import ChartEvent, ChartState
from common.actors import Actor
from knobs.models import SchedulerConfig
from orgs.services import org_hold
from tests.conftest import Tenants
from tests.factories import ChartFactory

Browser = Callable[[Any], Client]


def text(markup: str) -> str:
    """What a reader sees of `markup` before the page's script puts its times in their zone."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def why(browser: Browser, tenants: Tenants, chart_id: int) -> str:
    page = browser(tenants.member_a).get(f"/portal/acme/charts/{chart_id}/").content.decode()
    found = page.split('<dd class="why">', 1)
    return text(found[1].split("</dd>", 1)[0]) if len(found) == 2 else ""


def hhmm(moment: Any) -> str:
    return f"{moment.astimezone(UTC):%H:%M}"


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("budget", "Waiting for capacity in the shared pool, expected to start at about {until} UTC"),
        ("turn", "Waiting for its turn in the fair order, expected to start at about {until} UTC"),
        (
            "org_cap",
            "Your organisation is running as many charts at once as it may, expected to start at about {until} UTC",
        ),
        ("retry_budget", "Waiting for room for retries in the shared pool, expected to start at about {until} UTC"),
        ("provider_paused", "Waiting for the partner's rate limit until {until} UTC"),
    ],
)
def test_a_planned_chart_says_why_it_waits_and_until_when(
    tenants: Tenants, browser: Browser, reason: str, text: str
) -> None:
    until = timezone.now() + timedelta(minutes=9)
    chart = ChartFactory(org=tenants.org_a, position=0, waiting_reason=reason, waiting_until=until)

    assert why(browser, tenants, chart.pk) == text.format(until=hhmm(until))


def test_a_retry_says_when_it_failed_and_which_attempt_comes(tenants: Tenants, browser: Browser) -> None:
    SchedulerConfig.objects.update_or_create(id=1, defaults={"max_attempts": 3})
    until = timezone.now() + timedelta(minutes=2)
    chart = ChartFactory(
        org=tenants.org_a, state=ChartState.RETRY_WAIT, attempt=1, available_at=until,
        position=0, waiting_reason="backoff", waiting_until=until,
    )  # fmt: skip
    failed = timezone.now() - timedelta(minutes=1)
    ChartEvent.objects.create(chart=chart, from_state="running", to_state="retry_wait", actor="x", at=failed)

    assert why(browser, tenants, chart.pk) == (
        f"Retrying after a failure at {hhmm(failed)} UTC (try 2 of 3), not before {hhmm(until)} UTC"
    )


def test_a_held_orgs_chart_page_says_the_org_is_on_hold(tenants: Tenants, browser: Browser) -> None:
    chart = ChartFactory(org=tenants.org_a, position=0, waiting_reason="turn")
    org_hold(org=tenants.org_a, actor=Actor("user:test", staff=True))

    assert why(browser, tenants, chart.pk) == "Your organisation is on hold: its charts wait until it is released"


def test_a_new_chart_and_a_paused_one_say_so_and_a_running_one_says_nothing(tenants: Tenants, browser: Browser) -> None:
    new = ChartFactory(org=tenants.org_a)
    paused = ChartFactory(org=tenants.org_a, state=ChartState.PAUSED)
    running = ChartFactory(org=tenants.org_a, state=ChartState.RUNNING, waiting_reason="budget")

    assert why(browser, tenants, new.pk) == "Its place in the queue is being worked out"
    assert why(browser, tenants, paused.pk) == "Paused: it waits until it is resumed"
    assert why(browser, tenants, running.pk) == ""


def test_the_org_table_shows_each_charts_reason(tenants: Tenants, browser: Browser) -> None:
    until = timezone.now() + timedelta(minutes=4)
    ChartFactory(org=tenants.org_a, external_id="w1", position=0, waiting_reason="budget", waiting_until=until)
    ChartFactory(org=tenants.org_a, external_id="r1", state=ChartState.RUNNING)

    page = browser(tenants.member_a).get("/portal/acme/").content.decode()

    assert page.count('<span class="why">') == 1
    words = f"Waiting for capacity in the shared pool, expected to start at about {hhmm(until)} UTC"
    assert text(page.split('<span class="why">', 1)[1].split("</span>", 1)[0]) == words
    # The time is the viewer's to read in their zone (static/zone.js).
    assert f'<time datetime="{until.astimezone(UTC).isoformat()}" data-minutes data-clock-only>' in page


@pytest.mark.parametrize(
    ("seconds", "words"), [(59.6, "1 min"), (119.5, "2 min"), (3599.5, "60 min"), (5400, "1 h 30 min")]
)
def test_duration_words_round_before_they_split(seconds: float, words: str) -> None:
    from charts.running import duration_words

    assert duration_words(seconds) == words
