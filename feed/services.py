"""Webhooks: registering endpoints, turning the change feed into deliveries, and sending them.

At least once, in order per endpoint:
- `webhook_deliveries_collect` reads the feed after the endpoint's cursor and, in one transaction,
  writes a delivery row per event of the endpoint's types and moves the cursor past them: an event
  is either before the cursor with its row, or after it and read again.
- `webhook_endpoint_send` sends the endpoint's pending deliveries oldest first, one at a time, and
  stops at the first that fails (its next try waits, and so does everything behind it). One sender
  per endpoint at a time (an advisory lock, taken outside any transaction: a transaction would hold
  the feed's horizon back while the POST waits). A sender that dies mid-POST recorded nothing: the
  delivery is sent again, with the same idempotency key.
- A failure waits `FAIRSCHED_WEBHOOK_FIRST_RETRY` seconds, doubling up to an hour; an endpoint that
  has failed for `FAIRSCHED_WEBHOOK_GIVE_UP` seconds (a day) is disabled, its org told in the portal.
  Its cursor and pending deliveries stay: re-enabled, it resumes where it stopped.
"""

from __future__ import annotations

import json
import logging
import secrets
from datetime import datetime, timedelta
from itertools import takewhile

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from common.actors import Actor
from common.errors import InvalidInput, NotFound
from feed.delivery import Outcome, post, url_check
from feed.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from feed.selectors import START, WEBHOOK_TYPES, FeedEvent, feed_now, feed_read, position_decode
from feed.serializers import FeedEventSerializer
from orgs.models import Org
from scheduling import metrics

logger = logging.getLogger(__name__)

SEND_LOCK = 0x77686B  # "whk": with the endpoint's id, the advisory lock of its sender
COLLECT_BATCH = 500
SEND_BATCH = 20
LONGEST_RETRY = timedelta(hours=1)


def _event_types_check(event_types: list[str]) -> list[str]:
    unknown = sorted(set(event_types) - set(WEBHOOK_TYPES))
    if unknown or not event_types:
        raise InvalidInput(
            f"unknown event type {', '.join(unknown) or '(none given)'}; give some of {', '.join(WEBHOOK_TYPES)}",
            field="event_types",
        )
    return [name for name in WEBHOOK_TYPES if name in event_types]


def _endpoint_reach(actor: Actor, org_id: int | None) -> None:
    """An endpoint of one org is its tenants' (another org's is not there: 404); one of every org, staff's."""
    if org_id is None:
        actor.staff_required(field="org", what="an endpoint of every org")
    else:
        actor.org_required(org_id, field="endpoint")


def webhook_endpoint_create(
    *, org: Org | None, url: str, event_types: list[str], actor: Actor
) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint for `org` (None: every org) and return it with its secret (shown once).

    It hears events from now on: its cursor starts after every event already committed. A tenant
    registers one for an org it writes in (else 404), never one for every org (403)."""
    _endpoint_reach(actor, org.pk if org else None)
    url = url.strip()
    url_check(url)
    types = _event_types_check(event_types)
    secret = f"whsec_{secrets.token_hex(24)}"
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            org=org, url=url, event_types=types, secret=secret, cursor=feed_now().encode(), created_by=actor.name
        )
    logger.info("webhook endpoint %s registered by %s for %s", endpoint.pk, actor, org.slug if org else "every org")
    return endpoint, secret


def webhook_endpoint_update(
    *, endpoint: WebhookEndpoint, actor: Actor, active: bool | None = None, event_types: list[str] | None = None
) -> WebhookEndpoint:
    """Change what it hears, or disable or re-enable it (re-enabled, it forgets its failing streak)."""
    _endpoint_reach(actor, endpoint.org_id)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if event_types is not None:
            endpoint.event_types = _event_types_check(event_types)
        if active is not None and active != endpoint.active:
            endpoint.active = active
            if active:
                endpoint.failing_since = endpoint.disabled_at = None
                endpoint.disabled_reason = ""
            else:
                endpoint.disabled_at = timezone.now()
                endpoint.disabled_reason = f"disabled by {actor}"
        endpoint.save()
    return endpoint


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint, actor: Actor) -> None:
    _endpoint_reach(actor, endpoint.org_id)
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()
    logger.info("webhook endpoint %s deleted by %s", endpoint.pk, actor)


def webhook_delivery_send_again(*, endpoint: WebhookEndpoint, delivery_id: int, actor: Actor) -> WebhookDelivery:
    """Queue a delivery's event again for its endpoint, behind what waits, with the same idempotency key."""
    _endpoint_reach(actor, endpoint.org_id)
    original = WebhookDelivery.objects.filter(endpoint=endpoint, pk=delivery_id).first()
    if original is None:
        raise NotFound("delivery not found", field="detail")
    with transaction.atomic():
        again = WebhookDelivery.objects.create(
            endpoint=endpoint,
            event_id=original.event_id,
            event_type=original.event_type,
            body=original.body,
            idempotency_key=original.idempotency_key,
        )
    logger.info("webhook delivery %s sent again as %s by %s", original.pk, again.pk, actor)
    return again


def event_body(event: FeedEvent) -> str:
    """A delivery's JSON body: the event as the feed gives it to the endpoint's reader."""
    data = FeedEventSerializer(event).data
    return json.dumps({"id": event.id, "type": event.type, "data": data}, cls=DjangoJSONEncoder, sort_keys=True)


def idempotency_key(endpoint_id: int, event_id: str) -> str:
    return f"{endpoint_id}:{event_id}"


def webhook_deliveries_collect(*, endpoint_id: int) -> int:
    """Turn the feed's new events into the endpoint's deliveries; how many. Steps:

    1. Lock the endpoint row (SKIP LOCKED: a collector already at it does the work).
    2. Read the feed after its cursor, as its reader may see it: an org's endpoint its org's events
       in the portal's words, a global one every event whole; keep its event types.
    3. Write a delivery per event and move the cursor past what was read, in the same transaction.
    """
    with transaction.atomic():
        endpoint = (
            WebhookEndpoint.objects.select_for_update(skip_locked=True).filter(pk=endpoint_id, active=True).first()
        )
        if endpoint is None:
            return 0
        after = position_decode(endpoint.cursor, field="cursor") if endpoint.cursor else START
        org_ids = None if endpoint.org_id is None else [endpoint.org_id]
        page = feed_read(after=after, org_ids=org_ids, limit=COLLECT_BATCH, types=set(endpoint.event_types))
        if page.cursor == after:
            return 0
        WebhookDelivery.objects.bulk_create(
            WebhookDelivery(
                endpoint=endpoint,
                event_id=event.id,
                event_type=event.type,
                body=event_body(event),
                idempotency_key=idempotency_key(endpoint.pk, event.id),
            )
            for event in page.events
        )
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(cursor=page.cursor.encode())
    return len(page.events)


def webhook_endpoint_send(*, endpoint_id: int) -> int:
    """Send the endpoint's due deliveries in order, stopping at the first failure; how many went.

    1. Take the endpoint's sender lock, or leave (another sender is at it).
    2. Read the endpoint and its oldest `SEND_BATCH` pending deliveries (one query each, not two a
       delivery: a sender's round trips to the database were most of a delivery's time).
    3. For each, while it is due: POST it (`feed.delivery.post`) and record the attempt (`_record`);
       stop at a failure (it disables the endpoint once it has failed for a day). Then back to 2
       until nothing is due: a disabled endpoint is seen there, after at most a batch.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [SEND_LOCK, endpoint_id])
        (locked,) = cursor.fetchone()
    if not locked:
        return 0
    sent = 0
    try:
        while True:
            endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, active=True).select_related("org").first()
            if endpoint is None:
                return sent
            batch = WebhookDelivery.objects.filter(
                endpoint_id=endpoint_id, state=WebhookDelivery.State.PENDING
            ).order_by("id")[:SEND_BATCH]
            due = list(takewhile(lambda delivery: delivery.next_attempt_at <= timezone.now(), batch))
            if not due:
                return sent
            for delivery in due:
                outcome = post(
                    url=endpoint.url,
                    body=delivery.body.encode(),
                    secret=endpoint.secret,
                    idempotency_key=delivery.idempotency_key,
                    event_type=delivery.event_type,
                )
                disabled = _record(endpoint=endpoint, delivery=delivery, outcome=outcome, now=timezone.now())
                metrics.observe_webhook_attempt(
                    org=endpoint.org.slug if endpoint.org else "", ok=outcome.ok, disabled=disabled
                )
                if not outcome.ok:
                    return sent
                sent += 1
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [SEND_LOCK, endpoint_id])


def retry_delay(attempt: int) -> timedelta:
    """The wait after the `attempt`-th failure: FIRST_RETRY seconds, doubling, at most an hour."""
    seconds = settings.FAIRSCHED_WEBHOOK_FIRST_RETRY * 2 ** min(attempt - 1, 20)
    return min(timedelta(seconds=seconds), LONGEST_RETRY)


def _record(*, endpoint: WebhookEndpoint, delivery: WebhookDelivery, outcome: Outcome, now: datetime) -> bool:
    """One attempt's outcome, in one transaction: the attempt row; the delivery delivered, or due
    again after its backoff; the endpoint's failing streak ended, begun, or (a day old) disabled.
    Returns whether it disabled the endpoint.

    Committed without waiting for the disk (`synchronous_commit = off`): the wait was most of a
    delivery's time. A crash may then lose the last moment's records, never a part of one: such a
    delivery is sent again, under its idempotency key, as after a sender killed mid-POST."""
    number = delivery.attempt_count + 1
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit = off")
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            at=now,
            status=outcome.status,
            latency_ms=outcome.latency_ms,
            response_excerpt=outcome.excerpt,
            error=outcome.error,
        )
        if outcome.ok:
            WebhookDelivery.objects.filter(pk=delivery.pk).update(
                state=WebhookDelivery.State.DELIVERED, attempt_count=number, delivered_at=now
            )
            if endpoint.failing_since is not None:  # its failing streak ends
                WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=None)
                endpoint.failing_since = None
            return False
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            attempt_count=number, next_attempt_at=now + retry_delay(number)
        )
        failing_since = endpoint.failing_since or now
        if now - failing_since < timedelta(seconds=settings.FAIRSCHED_WEBHOOK_GIVE_UP):
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=failing_since)
            endpoint.failing_since = failing_since
            return False
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            failing_since=failing_since,
            active=False,
            disabled_at=now,
            disabled_reason=f"failing since {failing_since:%Y-%m-%d %H:%M} UTC: {outcome.error or outcome.status}"[
                :500
            ],
        )
    logger.warning("webhook endpoint %s disabled: failing since %s", endpoint.pk, failing_since)
    return True


def webhook_endpoints_due() -> list[int]:
    """The active endpoints with a pending delivery due now."""
    return list(
        WebhookDelivery.objects.filter(
            state=WebhookDelivery.State.PENDING, next_attempt_at__lte=timezone.now(), endpoint__active=True
        )
        .values_list("endpoint_id", flat=True)
        .distinct()
    )


def webhook_deliveries_collect_all() -> list[int]:
    """Collect every active endpoint's new events; the endpoints that got deliveries."""
    return [
        endpoint_id for endpoint_id in webhook_endpoints_active() if webhook_deliveries_collect(endpoint_id=endpoint_id)
    ]


def webhook_endpoints_active() -> list[int]:
    return list(WebhookEndpoint.objects.filter(active=True).values_list("pk", flat=True))
