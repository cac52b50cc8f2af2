"""The change feed: every chart transition, lever change and clear-time slip a caller may see, in the
order of their transactions, after an opaque cursor.

Four logs feed it, each written in the transaction of its change: the chart event log (`ChartEvent`),
the orgs' change log (`OrgChange`), the scheduler's (`ConfigChange`, staff only) and the replans'
clear-time slips (`ClearTimeSlip`). Each row keeps the id of the transaction that wrote it
(`common.txid`); the feed's order is (transaction id, log, row id), and a read serves only rows of
transactions that have ended (below the snapshot's xmin, the *horizon*). So a row can never appear
behind a cursor already handed out: no event is skipped, none repeated, whatever order concurrent
writers commit in, across restarts (the cursor is the position itself, nothing kept in memory).

The price: a transaction that stays open in the database holds the feed back until it ends (a role
that cannot see other roles' sessions: any database's). The passes' transactions are short; the
longest is a replan's write.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Model, Q, QuerySet

from charts.models import ChartEvent, ChartState
from charts.selectors import STAFF_ACTOR, SYSTEM_ACTOR_PREFIX, USER_ACTOR_PREFIX, last_error_summary
from common.errors import InvalidInput, NotFound
from common.txid import horizon
from feed.models import WebhookDelivery, WebhookEndpoint
from knobs.models import ConfigChange
from orgs.models import OrgChange
from scheduling.models import ClearTimeSlip

S = ChartState
# The logs in the order their rows of one transaction are served (the second key of the feed's order).
CHART, ORG, CONFIG, SLIP = 1, 2, 3, 4
PAGE_SIZE = 100
MAX_PAGE_SIZE = 500

# A chart transition's event type, by the state it reached (and, for `queued`, where it came from).
CHART_TYPES: dict[str, str] = {
    S.RUNNING: "chart.started",
    S.SUCCEEDED: "chart.succeeded",
    S.FAILED: "chart.failed",
    S.RETRY_WAIT: "chart.retrying",
    S.CANCELLED: "chart.cancelled",
    S.PAUSED: "chart.paused",
    S.DISPATCHING: "chart.dispatching",
}
# The event types a webhook may ask for (`chart.at_risk` comes with turnaround promises).
WEBHOOK_TYPES = (
    "chart.started",
    "chart.succeeded",
    "chart.failed",
    "chart.retrying",
    "chart.cancelled",
    "org.held",
    "org.released",
    "org.clear_time_slipped",
)


@dataclass(frozen=True, order=True)
class Position:
    """A place in the feed: after every row of (txid, log, id) and before the next."""

    txid: int = 0
    log: int = 0
    id: int = 0

    def encode(self) -> str:
        return base64.urlsafe_b64encode(f"{self.txid}.{self.log}.{self.id}".encode()).decode().rstrip("=")


START = Position()


def position_decode(cursor: str, *, field: str = "after") -> Position:
    """The position of a cursor the feed handed out; anything else is refused, naming `field`."""
    bad = InvalidInput("not a cursor of this feed: give the cursor of an earlier answer, or none", field=field)
    if not cursor or len(cursor) > 80:
        raise bad
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        txid, log, row_id = (int(part) for part in text.split("."))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if txid < 0 or row_id < 0 or log not in (0, CHART, ORG, CONFIG, SLIP) or txid >= 2**63 or row_id >= 2**63:
        raise bad
    if Position(txid, log, row_id).encode() != cursor:  # one spelling per position
        raise bad
    return Position(txid, log, row_id)


@dataclass(frozen=True)
class FeedEvent:
    """One event of the feed as its reader may see it. `id` is its position's cursor: unique, stable."""

    id: str
    type: str
    at: datetime
    org: str | None
    org_id: int | None
    actor: str
    reason: str = ""
    chart: int | None = None
    external_id: str | None = None
    workflow: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    field: str | None = None
    old_value: str | None = None
    new_value: str | None = None
    clear_before: datetime | None = None
    clear_at: datetime | None = None


@dataclass(frozen=True)
class FeedPage:
    events: list[FeedEvent]
    cursor: Position


def feed_horizon() -> int:
    """The oldest transaction still open in this database: every transaction below it has ended."""
    with connection.cursor() as cursor:
        return horizon(cursor)


def feed_now() -> Position:
    """The position after every event already committed: a new reader's start that skips the history
    (every transaction below the horizon has ended; the rest will come after it)."""
    return Position(feed_horizon(), 0, 0)


def feed_read(
    *, after: Position, org_ids: Collection[int] | None, limit: int = PAGE_SIZE, types: Collection[str] | None = None
) -> FeedPage:
    """The next events after `after` that a caller seeing `org_ids` (None: staff, every org) may see,
    at most `limit`, and the cursor to read on from. Steps:

    1. Take the horizon once: each log's query serves only rows below it, so the four agree.
    2. Read up to `limit` rows after the position from each log the caller may see (an index range
       on (txid, id) each), and merge them in the feed's order; keep the first `limit`.
    3. Word them for the caller (`_worded`): staff see every row whole; a tenant its own orgs' rows
       as the portal words them. The cursor is the last row read, or `after` if none.
    4. `types` (a webhook's choice) drops other types after the cursor moved past them.
    """
    horizon = feed_horizon()
    sources: list[tuple[int, QuerySet[Any]]] = [
        (CHART, ChartEvent.objects.select_related("chart__org", "chart__workflow")),
        (ORG, OrgChange.objects.select_related("org")),
        (SLIP, ClearTimeSlip.objects.select_related("org")),
    ]
    if org_ids is None:
        sources.append((CONFIG, ConfigChange.objects.all()))
    rows: list[tuple[Position, Model]] = []
    for log, queryset in sources:
        scoped = queryset
        if org_ids is not None:
            scoped = scoped.filter(chart__org_id__in=org_ids) if log == CHART else scoped.filter(org_id__in=org_ids)
        found = scoped.filter(_after(log, after), txid__lt=horizon).order_by("txid", "id")[:limit]
        rows.extend((Position(row.txid, log, row.pk), row) for row in found)
    rows.sort(key=lambda pair: pair[0])
    rows = rows[:limit]
    cursor = rows[-1][0] if rows else after
    events = _worded(rows, staff=org_ids is None)
    if types is not None:
        events = [event for event in events if event.type in types]
    return FeedPage(events=events, cursor=cursor)


def _after(log: int, after: Position) -> Q:
    """The rows of `log` that come after `after` in the order (txid, log, id)."""
    if log == after.log:
        return Q(txid__gt=after.txid) | Q(txid=after.txid, id__gt=after.id)
    if log < after.log:
        return Q(txid__gt=after.txid)
    return Q(txid__gte=after.txid)


def _worded(rows: Sequence[tuple[Position, Model]], *, staff: bool) -> list[FeedEvent]:
    """The events of `rows` as the caller may see them (`charts.selectors.events_as_seen`'s rules):

    1. staff see actors and reasons whole;
    2. a tenant sees the scheduler's actors, and `user:<name>` for a member of the row's org, else
       `staff`; a chart's reason as its first line, shortened; no reason of a lever change (the
       account manager's note) nor the scheduler's settings.
    """
    events = [_event(position, row) for position, row in rows]
    if staff:
        return events
    colleague = _colleagues(events)
    return [
        replace(
            event,
            actor=_actor_seen(event, colleague),
            reason=last_error_summary(event.reason) if event.chart is not None else "",
        )
        for event in events
    ]


def _colleagues(events: Iterable[FeedEvent]) -> Callable[[int | None, str], bool]:
    """Whether a username is a member of an org, for the users these events name: one query."""
    names = {e.actor.removeprefix(USER_ACTOR_PREFIX) for e in events if e.actor.startswith(USER_ACTOR_PREFIX)}
    org_ids = {e.org_id for e in events if e.org_id is not None}
    pairs: set[tuple[int, str]] = set()
    if names and org_ids:
        pairs = set(
            get_user_model()
            .objects.filter(memberships__org_id__in=org_ids, username__in=names)
            .values_list("memberships__org_id", "username")
        )
    return lambda org_id, name: org_id is not None and (org_id, name) in pairs


def _actor_seen(event: FeedEvent, colleague: Callable[[int | None, str], bool]) -> str:
    if event.actor.startswith(SYSTEM_ACTOR_PREFIX):
        return event.actor
    if event.actor.startswith(USER_ACTOR_PREFIX) and colleague(
        event.org_id, event.actor.removeprefix(USER_ACTOR_PREFIX)
    ):
        return event.actor
    return STAFF_ACTOR


def _event(position: Position, row: Model) -> FeedEvent:
    cursor = position.encode()
    if isinstance(row, ChartEvent):
        chart = row.chart
        return FeedEvent(
            id=cursor,
            type=chart_event_type(row.from_state, row.to_state),
            at=row.at,
            org=chart.org.slug,
            org_id=chart.org_id,
            actor=row.actor,
            reason=row.reason,
            chart=chart.pk,
            external_id=chart.external_id,
            workflow=chart.workflow.name,
            from_state=row.from_state,
            to_state=row.to_state,
        )
    if isinstance(row, OrgChange):
        return FeedEvent(
            id=cursor,
            type=org_change_type(row.field, row.old_value, row.new_value),
            at=row.at,
            org=row.org.slug,
            org_id=row.org_id,
            actor=row.actor,
            reason=row.reason,
            field=row.field,
            old_value=row.old_value,
            new_value=row.new_value,
        )
    if isinstance(row, ClearTimeSlip):
        return FeedEvent(
            id=cursor,
            type="org.clear_time_slipped",
            at=row.at,
            org=row.org.slug,
            org_id=row.org_id,
            actor="system:replan",
            clear_before=row.clear_before,
            clear_at=row.clear_at,
        )
    assert isinstance(row, ConfigChange)
    return FeedEvent(
        id=cursor,
        type="scheduler.changed",
        at=row.at,
        org=None,
        org_id=None,
        actor=row.actor,
        field=row.field,
        old_value=row.old_value,
        new_value=row.new_value,
    )


def chart_event_type(from_state: str, to_state: str) -> str:
    """A transition's event type: `chart.submitted`, `.resumed` or `.requeued` for one reaching
    `queued` (from nothing, from a pause, from a run that never started or was throttled), else by
    the state reached (`CHART_TYPES`)."""
    if to_state == S.QUEUED:
        if not from_state:
            return "chart.submitted"
        return "chart.resumed" if from_state == S.PAUSED else "chart.requeued"
    return CHART_TYPES.get(to_state, f"chart.{to_state}")


def org_change_type(field: str, old: str, new: str) -> str:
    """A lever change's event type: a hold or a release (by the hold lever or a weight to or from 0),
    else `org.changed`."""
    if (field == "hold" and new == "held") or (field == "weight" and new == "0" and old != "0"):
        return "org.held"
    if (field == "hold" and old == "held") or (field == "weight" and old == "0" and new != "0"):
        return "org.released"
    return "org.changed"


def endpoints_visible(*, org_ids: Collection[int] | None) -> QuerySet[WebhookEndpoint]:
    """The webhook endpoints a caller may see: every one (staff, None), or those of its orgs."""
    endpoints = WebhookEndpoint.objects.select_related("org").order_by("id")
    return endpoints if org_ids is None else endpoints.filter(org_id__in=org_ids)


def endpoint_get(*, org_ids: Collection[int] | None, endpoint_id: int) -> WebhookEndpoint:
    """One endpoint the caller may see; another org's (or a global one, for a tenant) is not found."""
    endpoint = endpoints_visible(org_ids=org_ids).filter(pk=endpoint_id).first()
    if endpoint is None:
        raise NotFound("webhook endpoint not found", field="detail")
    return endpoint


def deliveries_of(*, endpoint: WebhookEndpoint, states: Collection[str] | None = None) -> QuerySet[WebhookDelivery]:
    """The endpoint's delivery log, newest first, with each delivery's attempts."""
    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint).prefetch_related("attempts").order_by("-id")
    return deliveries if not states else deliveries.filter(state__in=states)
