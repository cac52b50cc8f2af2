"""The states people ask about in a customer's words: a held org's headline (its reason and whom to
ask, never a finish time), one finish time named alike in the headline, the plot and the table, the
states, tries and places in line, and past events that are never 'in 0 s'."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import strip_tags

from charts.models import Chart, ChartEvent, ChartState, WaitingReason
from charts.waiting import chart_waiting
from charts.words import ordinal, place_words, state_words, tries_words
from common.actors import Actor
from knobs.models import SchedulerConfig
from orgs.models import Membership
from orgs.selectors import org_contact
from orgs.services import org_hold, org_release
from tests.conftest import Tenants
from tests.factories import ChartFactory, MembershipFactory, UserFactory

Browser = Callable[[Any], Client]
STAFF = Actor("user:stella", staff=True)


@pytest.mark.parametrize(
    ("number", "text"),
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"), (21, "21st"),
     (102, "102nd"), (111, "111th"), (187, "187th")],
)  # fmt: skip
def test_ordinals(number: int, text: str) -> None:
    assert ordinal(number) == text


def test_places_in_line() -> None:
    assert [place_words(position) for position in (None, 0, 1, 11, 186)] == [
        "",
        "next",
        "2nd in line",
        "12th in line",
        "187th in line",
    ]


def test_states_in_words() -> None:
    assert state_words("dispatching") == "Starting"
    assert state_words("queued") == "Queued"
    assert state_words("succeeded") == "Succeeded"
    assert state_words("retry_wait") == "Waiting to retry"


@pytest.mark.parametrize(
    ("state", "attempt", "text"),
    [
        (ChartState.QUEUED, 0, "not started yet (up to 3 tries)"),
        (ChartState.RETRY_WAIT, 1, "try 2 of 3 to come"),
        (ChartState.DISPATCHING, 1, "try 1 of 3"),
        (ChartState.RUNNING, 2, "try 2 of 3"),
        (ChartState.SUCCEEDED, 1, "1 try of 3"),
        (ChartState.FAILED, 3, "3 tries of 3"),
        (ChartState.CANCELLED, 0, "never started"),
    ],
)
def test_tries_in_words(state: str, attempt: int, text: str) -> None:
    assert tries_words(Chart(state=state, attempt=attempt), max_attempts=3) == text


def test_a_resumed_chart_does_not_keep_its_plans_pause(tenants: Tenants) -> None:
    """Right after a resume the plan still says `chart_paused`: the chart is queued, and is not said paused."""
    resumed = ChartFactory(org=tenants.org_a, state=ChartState.QUEUED, position=3, waiting_reason="chart_paused")
    released = ChartFactory(org=tenants.org_a, state=ChartState.QUEUED, position=4, waiting_reason="org_held")

    for chart in (resumed, released):
        waiting = chart_waiting(Chart.objects.select_related("org").get(pk=chart.pk))
        assert waiting is not None
        assert waiting.reason == WaitingReason.NOT_YET_PLANNED


def test_the_contact_is_the_first_admin_with_an_email(tenants: Tenants) -> None:
    assert org_contact(org_id=tenants.org_a.pk) is None  # a member is no contact
    MembershipFactory(user=UserFactory(username="nomail", email=""), org=tenants.org_a, role=Membership.Role.ADMIN)
    admin = UserFactory(username="ann", email="ann@acme.example", first_name="Ann", last_name="Lee")
    MembershipFactory(user=admin, org=tenants.org_a, role=Membership.Role.ADMIN)
    MembershipFactory(user=UserFactory(username="later"), org=tenants.org_a, role=Membership.Role.ADMIN)

    contact = org_contact(org_id=tenants.org_a.pk)

    assert contact is not None
    assert (contact.name, contact.email) == ("Ann Lee", "ann@acme.example")


def test_a_held_orgs_headline_says_held_with_reason_and_contact_never_a_finish_time(
    tenants: Tenants, browser: Browser
) -> None:
    admin = UserFactory(username="ann", email="ann@acme.example", first_name="Ann", last_name="Lee")
    MembershipFactory(user=admin, org=tenants.org_a, role=Membership.Role.ADMIN)
    now = timezone.now()
    for index in range(3):
        ChartFactory(org=tenants.org_a, external_id=f"w{index}", eta=now - timedelta(seconds=1))
    tenants.org_a.clear_at = tenants.org_a.clear_low = tenants.org_a.clear_high = now - timedelta(seconds=1)
    tenants.org_a.save()
    org_hold(org=tenants.org_a, actor=STAFF, reason="your invoice is overdue")
    member = browser(tenants.member_a)

    table = member.get("/portal/acme/table/").content.decode()
    chart_page = member.get(f"/portal/acme/charts/{Chart.objects.get(external_id='w0').pk}/").content.decode()

    for html in (table, chart_page):
        assert "Your organisation is on hold" in html
        assert "Reason from your account team: your invoice is overdue" in html
        assert 'Questions: ask Ann Lee (<a href="mailto:ann@acme.example">ann@acme.example</a>)' in html
    assert "3 wait now" in table
    assert "predicted to be done" not in table
    assert "drain-plot" not in table  # nothing of the held org drains

    org_release(org=tenants.org_a, actor=STAFF, reason="paid")
    assert "on hold" not in member.get("/portal/acme/table/").content.decode()


def test_one_finish_time_is_named_alike_in_the_headline_the_plot_and_the_table(
    tenants: Tenants, browser: Browser
) -> None:
    now = timezone.now()
    eta = now + timedelta(hours=2)
    low, high = now + timedelta(hours=1, minutes=40), now + timedelta(hours=2, minutes=30)
    ChartFactory(org=tenants.org_a, external_id="one", eta=eta, eta_low=low, eta_high=high)
    tenants.org_a.clear_at, tenants.org_a.clear_low, tenants.org_a.clear_high = eta, low, high
    tenants.org_a.save()

    table = browser(tenants.member_a).get("/portal/acme/table/").content.decode()

    median = f"{eta:%Y-%m-%d %H:%M:%S} UTC"
    headline = re.search(r'<p class="headline">(.*?)</p>', table, re.S)
    caption = re.search(r'<figcaption id="drain-caption">(.*?)</figcaption>', table, re.S)
    assert headline
    assert caption
    for text in (headline[1], caption[1]):
        assert median in text
        assert "median prediction" in text
        assert f"likely between {low:%H:%M}\u2013{high:%H:%M} UTC" in strip_tags(text)
    assert "Predicted finish (median)" in table  # the table's column
    assert f"likely between {low:%H:%M}\u2013{high:%H:%M} UTC" in strip_tags(table.split("<tbody>", 1)[1])


def test_a_drain_minutes_long_labels_its_axis_to_the_second(tenants: Tenants, browser: Browser) -> None:
    now = timezone.now()
    ChartFactory(org=tenants.org_a, eta=now + timedelta(seconds=30), eta_low=now, eta_high=now + timedelta(seconds=50))

    table = browser(tenants.member_a).get("/portal/acme/table/").content.decode()

    labels = re.findall(r"data-clock=\"[^\"]+\" data-seconds>(\d\d:\d\d:\d\d)</text>", table)
    assert len(labels) == 5
    assert len(set(labels)) == 5  # never "08:01 08:02 08:02 08:02 08:02"


def test_the_portal_says_starting_tries_and_places_in_line(tenants: Tenants, browser: Browser) -> None:
    SchedulerConfig.objects.update_or_create(id=1, defaults={"max_attempts": 3})
    ChartFactory(org=tenants.org_a, external_id="starting", state=ChartState.DISPATCHING, attempt=1)
    ChartFactory(org=tenants.org_a, external_id="first", position=0, waiting_reason="budget")
    ChartFactory(org=tenants.org_a, external_id="twelfth", position=11, waiting_reason="turn")

    table = browser(tenants.member_a).get("/portal/acme/table/").content.decode()

    rows = dict(re.findall(r'<th scope="row"><a [^>]*>([^<]+)</a></th>(.*?)</tr>', table, re.S))
    assert "Starting" in rows["starting"]
    assert "try 1 of 3" in rows["starting"]
    assert "<td>next</td>" in rows["first"]
    assert "<td>12th in line</td>" in rows["twelfth"]
    assert "not started yet (up to 3 tries)" in rows["twelfth"]
    assert "Dispatching" not in table
    assert "Position" not in table


def test_past_events_never_read_in_the_future(tenants: Tenants, browser: Browser) -> None:
    chart = ChartFactory(org=tenants.org_a)
    # A clock a little ahead of the web process (another host wrote the event).
    ChartEvent.objects.create(
        chart=chart, from_state="", to_state="queued", actor="user:alice", at=timezone.now() + timedelta(seconds=2)
    )

    page = browser(tenants.member_a).get(f"/portal/acme/charts/{chart.pk}/").content.decode()

    history = page.split('class="history"', 1)[1]
    assert "(in " not in history
    assert "(just now)" in history
    assert "data-past" in history
