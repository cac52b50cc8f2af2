"""The change feed (`GET /api/v1/events/`) and the webhook endpoints (`/api/v1/webhooks/`, staff).

A long poll (`wait`) runs in the request's thread (the web server runs each request whole in one thread:
`fairsched/wsgi_bridge.py`): it reads the feed every `POLL_SECONDS`, and gives its database connection
back between reads, so a waiting reader holds a thread but no connection. At most
`FAIRSCHED_FEED_MAX_WAITERS` requests of a process wait at once; past that, a read answers at once
(an empty page, read again), so that long polls can never take every thread of a worker.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import CursorPagination, FairschedAPIView
from common.strict import PageQuerySerializer
from feed import services
from feed.models import WebhookEndpoint
from feed.selectors import (
    PAGE_SIZE,
    START,
    FeedPage,
    Position,
    deliveries_of,
    endpoint_get,
    endpoints_visible,
    feed_read,
    position_decode,
)
from feed.serializers import (
    DeliveryFilterSerializer,
    FeedEventSerializer,
    FeedPageSerializer,
    FeedQuerySerializer,
    WebhookDeliverySerializer,
    WebhookEndpointCreatedSerializer,
    WebhookEndpointCreateSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointUpdateSerializer,
)
from orgs.access import IsStaffScope, actor_of, visible_org_ids
from orgs.selectors import org_for_input

POLL_SECONDS = 0.25
_waiters = threading.BoundedSemaphore(settings.FAIRSCHED_FEED_MAX_WAITERS)


class EventFeedView(FairschedAPIView, APIView):
    """Every chart transition, lever change and clear-time slip the caller may see, in commit order."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[FeedQuerySerializer], responses=FeedPageSerializer)
    def get(self, request: Request) -> Response:
        """The events after `after` (a cursor from an earlier answer), at most `page_size` (100).
        With `wait`, an answer with no event yet waits up to that many seconds for one."""
        query = FeedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        wanted = query.validated_data
        after = position_decode(wanted["after"]) if "after" in wanted else START
        org_ids = visible_org_ids(request)
        limit = wanted.get("page_size", PAGE_SIZE)
        page = feed_read(after=after, org_ids=org_ids, limit=limit)
        wait = wanted.get("wait", 0.0)
        if not page.events and wait > 0 and _waiters.acquire(blocking=False):
            try:
                page = _wait_for_news(after=after, org_ids=org_ids, limit=limit, wait=wait)
            finally:
                _waiters.release()
        results = FeedEventSerializer(page.events, many=True).data
        return Response({"results": results, "cursor": page.cursor.encode()})


def _wait_for_news(*, after: Position, org_ids: frozenset[int] | None, limit: int, wait: float) -> FeedPage:
    """Read again every `POLL_SECONDS` until an event comes or `wait` seconds pass; the connection
    goes back (to the pool, or closed) while the thread sleeps."""
    deadline = time.monotonic() + wait
    while True:
        if connection.in_atomic_block:  # a caller's transaction (a test's) keeps its connection
            time.sleep(POLL_SECONDS)
        else:
            connection.close()
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            close_old_connections()
        page = feed_read(after=after, org_ids=org_ids, limit=limit)
        if page.events or time.monotonic() >= deadline:
            return page


class WebhookDeliveryPagination(CursorPagination):
    ordering = "-id"


class WebhookEndpointPagination(CursorPagination):
    ordering = "id"


class WebhookEndpointViewSet(FairschedAPIView, viewsets.GenericViewSet[WebhookEndpoint]):
    """Webhook endpoints of every org (staff): register, list, change, delete; their delivery log."""

    permission_classes = [IsStaffScope]
    serializer_class = WebhookEndpointSerializer
    lookup_value_regex = "[0-9]+"
    pagination_class = WebhookEndpointPagination

    def get_queryset(self) -> QuerySet[WebhookEndpoint]:
        return endpoints_visible(org_ids=visible_org_ids(self.request))

    def list(self, request: Request) -> Response:
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(WebhookEndpointSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(WebhookEndpointSerializer(self._endpoint(pk)).data)

    @extend_schema(request=WebhookEndpointCreateSerializer, responses={201: WebhookEndpointCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Register an endpoint. The answer holds its signing secret: the only time it is shown."""
        given = WebhookEndpointCreateSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        org = org_for_input(org_ids=None, slug=data["org"]) if data.get("org") else None
        endpoint, secret = services.webhook_endpoint_create(
            org=org, url=data["url"], event_types=data["event_types"], actor=actor_of(request)
        )
        shown = WebhookEndpointCreatedSerializer(endpoint).data
        return Response({**shown, "secret": secret}, status=status.HTTP_201_CREATED)

    @extend_schema(request=WebhookEndpointUpdateSerializer, responses=WebhookEndpointSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        """Change its event types, or disable (`active: false`) or re-enable it."""
        given = WebhookEndpointUpdateSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        endpoint = services.webhook_endpoint_update(
            endpoint=self._endpoint(pk), actor=actor_of(request), **given.validated_data
        )
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(responses={204: OpenApiResponse(description="Deleted, with its delivery log.")})
    def destroy(self, request: Request, pk: str) -> Response:
        services.webhook_endpoint_delete(endpoint=self._endpoint(pk), actor=actor_of(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(parameters=[DeliveryFilterSerializer], responses=WebhookDeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str) -> Response:
        """The endpoint's delivery log, newest first, each with its attempts."""
        filters = DeliveryFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        endpoint = self._endpoint(pk)
        paginator = WebhookDeliveryPagination()
        page = paginator.paginate_queryset(
            deliveries_of(endpoint=endpoint, states=filters.validated_data.get("state")), request, view=self
        )
        return paginator.get_paginated_response(WebhookDeliverySerializer(page or [], many=True).data)

    @extend_schema(request=None, responses={201: WebhookDeliverySerializer})
    @action(detail=True, methods=["post"], url_path=r"deliveries/(?P<delivery_id>[0-9]+)/send-again")
    def send_again(self, request: Request, pk: str, delivery_id: str) -> Response:
        """Send a delivery's event again (with the same idempotency key), after what is queued."""
        delivery = services.webhook_delivery_send_again(
            endpoint=self._endpoint(pk), delivery_id=int(delivery_id), actor=actor_of(request)
        )
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_201_CREATED)

    def _endpoint(self, pk: str) -> WebhookEndpoint:
        return endpoint_get(org_ids=visible_org_ids(self.request), endpoint_id=int(pk))
