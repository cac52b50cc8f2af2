"""The change feed on the real PostgreSQL: commit order across concurrent writers, paging, long polls,
the caller's scope and wording, and strict query parameters.

Every test here commits (transaction=True): the feed serves only ended transactions, and a test's own
open transaction would hold it back.
"""

from __future__ import annotations

import random
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from charts import services as chart_services
from charts.models import Chart, ChartEvent
from common import txid
from common.actors import Actor
from common.txid import HORIZON_SQL
from feed import api as feed_api
from feed.selectors import START, Position, feed_horizon, feed_read, position_decode
from knobs import services as knobs_services
from orgs import services as org_services
from orgs.access import api_token_issue
from scheduling.models import ClearTimeSlip
from scheduling.replan import _record_slips
from tests import processes
from tests.conftest import Tenants
from tests.database import database_url

pytestmark = pytest.mark.django_db(transaction=True)
SETTLE_SECONDS = 60.0  # the horizon is cluster-wide: another database's open transaction holds it too


def settled(txid: int) -> None:
    """Wait until every transaction up to `txid` has ended as the feed sees it (its horizon passed it)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while feed_horizon() <= txid:
        assert time.monotonic() < deadline, "the feed's horizon did not pass the test's transactions"
        time.sleep(0.05)


def current_txid() -> int:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        return int(conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0])  # type: ignore[index]


def read_all(*, org_ids: Any = None, after: Position = START, limit: int = 100) -> list[Any]:
    events: list[Any] = []
    while True:
        page = feed_read(after=after, org_ids=org_ids, limit=limit)
        events.extend(page.events)
        if page.cursor == after:
            return events
        after = page.cursor


@pytest.fixture
def chart(tenants: Tenants) -> Chart:
    chart, _ = chart_services.chart_submit(
        org=tenants.org_a, workflow="render", external_id="a-1", actor=Actor("user:alice", staff=True)
    )
    return chart


def insert_event(conn: psycopg.Connection[Any], chart_id: int, reason: str) -> int:
    row = conn.execute(
        "INSERT INTO charts_chartevent (chart_id, from_state, to_state, actor, reason, at)"
        " VALUES (%s, 'queued', 'paused', 'user:alice', %s, now()) RETURNING id",
        [chart_id, reason],
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_an_event_committed_after_a_higher_id_is_not_skipped(chart: Chart) -> None:
    """Two writers: the lower id commits after the higher one. A plain id cursor passes the higher id
    and never sees the lower one; the feed's cursor sees both, each once."""
    settled(current_txid())
    after = _drain(START)
    last_id = ChartEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    with psycopg.connect(database_url()) as first, psycopg.connect(database_url()) as second:
        low = insert_event(first, chart.pk, "lower id, commits last")
        high = insert_event(second, chart.pk, "higher id, commits first")
        second.commit()
        assert low < high

        # A plain id cursor reads now: it passes `high`...
        by_id = list(ChartEvent.objects.filter(id__gt=last_id).order_by("id").values_list("id", flat=True))
        assert by_id == [high]
        id_cursor = by_id[-1]
        # ... and the feed serves neither while the older transaction is open.
        waiting = feed_read(after=after, org_ids=None)
        assert [e.reason for e in waiting.events] == []
        first.commit()
        txid = int(first.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0])  # type: ignore[index]

    assert list(ChartEvent.objects.filter(id__gt=id_cursor).values_list("id", flat=True)) == []  # `low`: lost
    settled(txid)
    reasons = [e.reason for e in read_all(after=waiting.cursor)]
    assert reasons == ["lower id, commits last", "higher id, commits first"]


def test_the_feed_read_while_several_processes_commit_gives_each_event_once_in_order(chart: Chart) -> None:
    """Four processes commit events in transactions of random length (some roll back) while the feed
    is read on: at the end the reader has had every committed event exactly once, in the feed's order,
    and nothing rolled back."""
    settled(current_txid())
    cursor = feed_read(after=START, org_ids=None, limit=500).cursor
    cursor = _drain(cursor)
    writer = textwrap.dedent(
        """
        import random, sys, time, psycopg
        seed, url, chart_id = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
        rng = random.Random(seed)
        with psycopg.connect(url) as conn:
            for n in range(25):
                for k in range(rng.randint(1, 3)):
                    conn.execute(
                        "INSERT INTO charts_chartevent (chart_id, from_state, to_state, actor, reason, at)"
                        " VALUES (%s, 'queued', 'paused', 'system:test', %s, now())",
                        [chart_id, f"w{seed}-{n}-{k}"],
                    )
                    time.sleep(rng.random() * 0.02)
                if rng.random() < 0.2:
                    conn.rollback()
                else:
                    conn.commit()
        """
    )
    writers = [
        processes.start([sys.executable, "-c", writer, str(seed), database_url(), str(chart.pk)]) for seed in range(4)
    ]
    seen: list[Any] = []
    try:
        while any(w.poll() is None for w in writers):
            page = feed_read(after=cursor, org_ids=None, limit=random.randint(1, 20))
            seen.extend(page.events)
            cursor = page.cursor
            time.sleep(0.01)
    finally:
        for w in writers:
            processes.end(w)
    assert all(w.returncode == 0 for w in writers)
    settled(current_txid())
    while True:
        page = feed_read(after=cursor, org_ids=None, limit=50)
        if page.cursor == cursor:
            break
        seen.extend(page.events)
        cursor = page.cursor
    mine = [e for e in seen if e.actor == "system:test"]
    committed = list(
        ChartEvent.objects.filter(actor="system:test").order_by("txid", "id").values_list("reason", flat=True)
    )
    assert [e.reason for e in mine] == committed
    assert len({e.id for e in seen}) == len(seen)
    assert [position_decode(e.id) for e in seen] == sorted(position_decode(e.id) for e in seen)
    assert 40 < len(committed) < 250


def _drain(cursor: Position) -> Position:
    while True:
        page = feed_read(after=cursor, org_ids=None, limit=500)
        if page.cursor == cursor:
            return cursor
        cursor = page.cursor


def test_every_kind_of_event_in_the_feed_with_its_type(tenants: Tenants, chart: Chart) -> None:
    chart_services.chart_pause(chart=chart, actor=Actor("user:alice", staff=True))
    org_services.org_hold(org=tenants.org_b, actor=Actor("user:stella", staff=True), reason="unpaid invoice")
    org_services.org_release(org=tenants.org_b, actor=Actor("user:stella", staff=True))
    knobs_services.budget_set(budget=7, actor=Actor("user:stella", staff=True))
    now = timezone.now()
    _record_slips(now, [(tenants.org_a.pk, now + timedelta(minutes=10), now + timedelta(minutes=20))])
    settled(current_txid())
    events = read_all()
    assert [e.type for e in events] == [
        "chart.submitted",
        "chart.paused",
        "org.held",
        "org.released",
        "scheduler.changed",
        "org.clear_time_slipped",
    ]
    held = events[2]
    assert (held.org, held.actor, held.reason) == ("beta", "user:stella", "unpaid invoice")
    slip = events[-1]
    assert (slip.org, slip.clear_at - slip.clear_before) == ("acme", timedelta(minutes=10))


def test_a_tenant_sees_its_own_orgs_events_in_the_portals_words(tenants: Tenants) -> None:
    chart_a, _ = chart_services.chart_submit(
        org=tenants.org_a, workflow="render", external_id="a", actor=Actor("user:alice", staff=True)
    )
    chart_b, _ = chart_services.chart_submit(
        org=tenants.org_b, workflow="render", external_id="b", actor=Actor("user:bob", staff=True)
    )
    chart_services.chart_cancel(
        chart=chart_a, actor=Actor("user:stella", staff=True), reason="duplicate\nsee ticket 4711 on host db-3"
    )
    org_services.org_hold(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="unpaid invoice")
    org_services.org_hold(org=tenants.org_b, actor=Actor("user:stella", staff=True), reason="unpaid invoice")
    knobs_services.budget_set(budget=7, actor=Actor("user:stella", staff=True))
    settled(current_txid())
    alice = APIClient()
    alice.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.member_a, org=tenants.org_a)}")  # type: ignore[arg-type]
    answer = alice.get("/api/v1/events/")
    assert answer.status_code == 200, answer.content
    events = answer.json()["results"]
    assert {e["org"] for e in events} == {"acme"}
    assert chart_b.pk not in {e["chart"] for e in events}
    assert "scheduler.changed" not in {e["type"] for e in events}
    cancelled = next(e for e in events if e["type"] == "chart.cancelled")
    assert (cancelled["actor"], cancelled["reason"]) == ("staff", "duplicate")
    submitted = next(e for e in events if e["type"] == "chart.submitted")
    assert submitted["actor"] == "user:alice"  # a colleague keeps her name
    held = next(e for e in events if e["type"] == "org.held")
    assert (held["actor"], held["reason"]) == ("staff", "")

    staff = APIClient()
    staff.force_login(tenants.staff)
    everything = staff.get("/api/v1/events/").json()["results"]
    assert {e["org"] for e in everything} >= {"acme", "beta", None}
    assert next(e for e in everything if e["type"] == "chart.cancelled")["reason"].startswith("duplicate\nsee")

    outsider = APIClient()
    outsider.force_login(tenants.outsider)
    assert outsider.get("/api/v1/events/").json()["results"] == []
    assert APIClient().get("/api/v1/events/").status_code in (401, 403)


def test_pages_follow_each_other_without_gap_or_repeat(tenants: Tenants) -> None:
    chart_services.chart_submit_bulk(
        org=tenants.org_a,
        items=[chart_services.ChartRequest("render", f"bulk-{n}", None, False, 0) for n in range(23)],
        actor=Actor("user:alice", staff=True),
    )
    settled(current_txid())
    staff = APIClient()
    staff.force_login(tenants.staff)
    seen: list[str] = []
    cursor = ""
    for _ in range(20):
        answer = staff.get("/api/v1/events/", {"page_size": 4, **({"after": cursor} if cursor else {})}).json()
        if not answer["results"]:
            assert answer["cursor"] == cursor
            break
        seen.extend(e["id"] for e in answer["results"])
        cursor = answer["cursor"]
        assert cursor == answer["results"][-1]["id"]
    assert len(seen) == len(set(seen)) == len(read_all())
    assert len(seen) >= 23


def test_a_long_poll_answers_when_an_event_commits(tenants: Tenants, chart: Chart) -> None:
    settled(current_txid())
    staff = APIClient()
    staff.force_login(tenants.staff)
    cursor = staff.get("/api/v1/events/", {"page_size": 500}).json()["cursor"]

    def later() -> None:
        time.sleep(0.5)
        chart_services.chart_pause(chart=chart, actor=Actor("user:alice", staff=True))

    writer = threading.Thread(target=later)
    writer.start()
    try:
        answer = staff.get("/api/v1/events/", {"after": cursor, "wait": 30})
    finally:
        writer.join()
    assert answer.status_code == 200
    assert [e["type"] for e in answer.json()["results"]] == ["chart.paused"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"after": "nonsense"}, "after"),
        ({"after": Position(1, 9, 1).encode()}, "after"),
        ({"after": "MS4xLjE"}, None),  # a real cursor (1.1.1), accepted
        ({"wait": "31"}, "wait"),
        ({"wait": "-1"}, "wait"),
        ({"wait": "soon"}, "wait"),
        ({"page_size": "0"}, "page_size"),
        ({"cursor": "x"}, "cursor"),
        ({"since": "x"}, "since"),
    ],
)
def test_bad_query_parameters_are_refused_by_name(tenants: Tenants, query: dict[str, str], field: str | None) -> None:
    staff = APIClient()
    staff.force_login(tenants.staff)
    answer = staff.get("/api/v1/events/", query)
    if field is None:
        assert answer.status_code == 200
    else:
        assert answer.status_code == 400, answer.content
        assert field in answer.json()


def test_a_repeated_parameter_is_refused(tenants: Tenants) -> None:
    staff = APIClient()
    staff.force_login(tenants.staff)
    assert "wait" in staff.get("/api/v1/events/?wait=1&wait=2").json()


def test_a_slip_is_a_later_clear_time_by_more_than_the_share(tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_FEED_SLIP_SHARE = 0.25
    settings.FAIRSCHED_FEED_SLIP_MIN_SECONDS = 60
    now = timezone.now()
    minutes: Callable[[float], Any] = lambda m: now + timedelta(minutes=m)  # noqa: E731
    org = tenants.org_a.pk
    _record_slips(
        now,
        [
            (org, minutes(10), minutes(13)),  # 3 of 10 minutes later: a slip
            (org, minutes(10), minutes(12)),  # 2 of 10: within the share
            (org, minutes(1), minutes(1.9)),  # 90% later but under a minute
            (org, minutes(10), minutes(5)),  # earlier
            (org, None, minutes(5)),  # a new backlog
            (org, minutes(5), None),  # cleared
        ],
    )
    assert list(ClearTimeSlip.objects.values_list("clear_before", "clear_at")) == [(minutes(10), minutes(13))]


def test_the_horizon_sql_is_the_snapshots_xmin() -> None:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        (horizon,) = conn.execute(HORIZON_SQL).fetchone()  # type: ignore[misc]
        (next_xid,) = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()  # type: ignore[misc]
    assert 0 < horizon <= next_xid


def test_past_the_waiters_limit_a_long_poll_answers_at_once(
    tenants: Tenants, chart: Chart, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long polls never take every request thread: with the process's waiters all busy, a read with
    `wait` does not wait (here: waiting would fail the test), it answers what there is."""
    busy = threading.BoundedSemaphore(1)
    busy.acquire()
    monkeypatch.setattr(feed_api, "_waiters", busy)

    def no_waiting(**kwargs: Any) -> Any:
        raise AssertionError("waited past the limit")

    monkeypatch.setattr(feed_api, "_wait_for_news", no_waiting)
    staff = APIClient()
    staff.force_login(tenants.staff)
    settled(current_txid())
    cursor = _drain(START).encode()
    answer = staff.get("/api/v1/events/", {"after": cursor, "wait": 30})
    assert answer.status_code == 200
    assert answer.json() == {"results": [], "cursor": cursor}


def test_a_transaction_open_in_another_database_does_not_hold_the_feed_back(chart: Chart) -> None:
    """The horizon is this database's: another database's open transaction (another app on the same
    server) does not hold the feed back, while one of this database does (the first test)."""
    settled(current_txid())
    after = _drain(START)
    elsewhere = database_url().rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(elsewhere) as other:
        other.execute("SELECT pg_current_xact_id()")  # takes a transaction id, and keeps it open
        chart_services.chart_pause(chart=chart, actor=Actor("user:alice", staff=True))
        deadline = time.monotonic() + SETTLE_SECONDS
        while not (page := feed_read(after=after, org_ids=None)).events:
            assert time.monotonic() < deadline, "the other database's transaction held the feed back"
            time.sleep(0.05)
        assert [e.type for e in page.events] == ["chart.paused"]
        other.rollback()


@pytest.mark.parametrize(
    ("xid", "near", "widened"),
    [
        (5, 2**32 + 10, 2**32 + 5),
        (12, 2**32 + 10, 2**32 + 12),
        (2**32 - 3, 2**32 + 2, 2**32 - 3),
        (1, 2**32 - 2, 2**32 + 1),
    ],
)
def test_a_32_bit_transaction_id_is_widened_on_either_side_of_its_neighbour(xid: int, near: int, widened: int) -> None:
    assert txid._widened(xid, near) == widened
