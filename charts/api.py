"""Chart endpoints: submit (one or in bulk), list, retrieve, and the customer's levers on a chart.

Who may do what: staff (staff tokens, staff sessions) pull every lever on every org. Tenants (org
tokens, members' sessions) act on their own org's charts (viewers only read): submit, pause, resume,
cancel, move to top, and `priority` from -10 to 10, which only orders the org's own charts inside its
share of each round. `high_priority` (the operators' tier, ahead of every org's share) and a priority
beyond that range are staff levers: a tenant asking for them gets 403 naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.fields import DateTimeField
from rest_framework.request import Request
from rest_framework.response import Response

from charts import services
from charts.models import Chart
from charts.selectors import SubmitWarning, chart_events, chart_get, charts_visible, events_as_seen, submit_warnings
from charts.serializers import (
    BulkResultSerializer,
    BulkSubmitSerializer,
    ChartDetailSerializer,
    ChartEventSerializer,
    ChartFilterSerializer,
    ChartLeverSerializer,
    ChartSerializer,
    ChartSubmitSerializer,
    PrioritizeSerializer,
    parse_bulk_items,
)
from common.api import CursorPagination, FairschedAPIView
from common.errors import FieldsInvalid, InvalidInput
from common.memory import collector_paused
from common.reasons import ReasonSerializer, reason_read
from common.strict import PageQuerySerializer
from orgs.access import actor_of, require_write, scope_of, visible_org_ids
from orgs.selectors import org_for_input


class ChartCursorPagination(CursorPagination):
    # The id is unique and never changes: a stable cursor even while the plan reorders charts.
    ordering = "-id"


class ChartEventCursorPagination(CursorPagination):
    # Oldest first, as a history reads; the id follows the order of the chart's transitions.
    ordering = "id"


class ChartViewSet(FairschedAPIView, viewsets.GenericViewSet[Chart]):
    """Charts of the caller's orgs. Another org's chart is 404 on every route."""

    serializer_class = ChartSerializer
    pagination_class = ChartCursorPagination
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[Chart]:
        return charts_visible(org_ids=visible_org_ids(self.request))

    @extend_schema(parameters=[ChartFilterSerializer])
    def list(self, request: Request) -> Response:
        filters = ChartFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        wanted = filters.validated_data
        charts = charts_visible(
            org_ids=visible_org_ids(request),
            org_slug=wanted.get("org"),
            states=wanted.get("state"),
            workflow=wanted.get("workflow"),
            external_id=wanted.get("external_id"),
            created_after=wanted.get("created_after"),
            created_before=wanted.get("created_before"),
            updated_after=wanted.get("updated_after"),
            at_risk=wanted.get("at_risk"),
            late=wanted.get("late"),
        )
        page = self.paginate_queryset(charts)
        return self.get_paginated_response(ChartSerializer(page, many=True).data)

    @extend_schema(responses=ChartDetailSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(ChartDetailSerializer(self._chart(pk)).data)

    @extend_schema(responses=ChartEventSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=ChartEventCursorPagination)
    def events(self, request: Request, pk: str) -> Response:
        """The chart's history, oldest first: when, from which state to which, why and who."""
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        chart = self._chart(pk)
        paginator = ChartEventCursorPagination()
        page = paginator.paginate_queryset(chart_events(chart=chart), request, view=self) or []
        seen = events_as_seen(events=page, org_id=chart.org_id, staff=scope_of(request).staff)
        return paginator.get_paginated_response(ChartEventSerializer(seen, many=True).data)

    @extend_schema(
        request=ChartSubmitSerializer,
        responses={
            201: ChartLeverSerializer,
            200: OpenApiResponse(ChartLeverSerializer, description="A repeat: the chart submitted before."),
            403: OpenApiResponse(
                description="A tenant asked for a staff lever: high_priority, or a priority beyond -10..10"
                " (the body names the field)."
            ),
        },
    )
    def create(self, request: Request) -> Response:
        """Submit one chart; idempotent on (org, external id): a repeat returns the same chart with 200.
        Every problem of the chart is in one answer, by field, as for an item of a bulk submission."""
        body = request.data
        if not isinstance(body, dict):
            raise InvalidInput("the body must be a JSON object: a chart", field="detail")
        slug = body.get("org")
        actor = actor_of(request)
        # The bulk's reading of one item (`parse_bulk_items`) and its rule (`chart_submit`): one rule for both.
        (item,) = parse_bulk_items([{key: value for key, value in body.items() if key != "org"}])
        try:
            if slug is not None and not isinstance(slug, str):
                raise InvalidInput("org must be an org's slug", field="org")
            org = org_for_input(org_ids=visible_org_ids(request), slug=slug)
        except InvalidInput as bad:
            problems = services.chart_submit_problems(item=item, actor=actor)
            raise FieldsInvalid({"org": [bad.message], **problems}) from None
        require_write(request, org.pk)
        chart, created = services.chart_submit(
            org=org,
            workflow=item.workflow,
            external_id=item.external_id,
            payload=item.payload,
            high_priority=item.high_priority,
            priority=item.priority,
            due_at=item.due_at,
            actor=actor,
            problems=item.problems,
        )
        warnings = submit_warnings(org=org, due_ats=[item.due_at], results=[(chart, created)]).get(0, [])
        if created:
            # Just written with its org and workflow, and no plan yet: nothing to read again.
            return Response(
                ChartLeverSerializer(chart, context={"replanning": True, "warnings": warnings}).data,
                status=status.HTTP_201_CREATED,
            )
        return self._fresh(chart, replanning=False, warnings=warnings)

    @extend_schema(
        request=BulkSubmitSerializer,
        responses={
            201: BulkResultSerializer,
            200: OpenApiResponse(BulkResultSerializer, description="Every item was a repeat."),
            403: OpenApiResponse(
                description='A tenant asked for a staff lever in some items (`{"items": {"3":'
                ' {"high_priority": [...]}}}`) and nothing else was wrong (else: listed in the 400);'
                " nothing was written."
            ),
        },
    )
    @action(detail=False, methods=["post"])
    def bulk(self, request: Request) -> Response:
        """Submit up to 10,000 charts of one org, all or nothing; a bad item is reported by its index
        (`{"items": {"3": {"workflow": ["..."]}}}`), every problem of every item in one answer, and nothing
        is written. The whole body is limited to
        DATA_UPLOAD_MAX_MEMORY_SIZE (5 MiB by default; larger is 413): keep payloads small in bulk."""
        with collector_paused():  # tens of thousands of objects, no cycle (common/memory.py)
            body = request.data
            if not isinstance(body, dict):
                raise InvalidInput("the body must be a JSON object with items", field="items")
            slug = body.get("org")
            if slug is not None and not isinstance(slug, str):
                raise InvalidInput("org must be an org's slug", field="org")
            org = org_for_input(org_ids=visible_org_ids(request), slug=slug)
            require_write(request, org.pk)
            items = parse_bulk_items(body.get("items"))
            results = services.chart_submit_bulk(org=org, items=items, actor=actor_of(request))
            created = sum(1 for _, is_new in results if is_new)
            warnings = submit_warnings(org=org, due_ats=[item.due_at for item in items], results=results)
            result = {
                "created": created,
                "existing": len(results) - created,
                "charts": [
                    {
                        "id": c.pk,
                        "external_id": c.external_id,
                        "created": is_new,
                        "due_at": _moment(c.due_at),
                        "warnings": [{"field": w.field, "message": w.message} for w in warnings.get(index, [])],
                    }
                    for index, (c, is_new) in enumerate(results)
                ],
            }
        return Response(result, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=ReasonSerializer, responses=ChartLeverSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        chart, reason = self._writable(request, pk), self._reason(request)
        services.chart_pause(chart=chart, actor=actor_of(request), reason=reason)
        return self._fresh(chart)

    @extend_schema(request=ReasonSerializer, responses=ChartLeverSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        chart, reason = self._writable(request, pk), self._reason(request)
        services.chart_resume(chart=chart, actor=actor_of(request), reason=reason)
        return self._fresh(chart)

    @extend_schema(
        request=PrioritizeSerializer,
        responses={
            200: ChartLeverSerializer,
            403: OpenApiResponse(
                description="A tenant asked for a staff lever: high_priority, or a priority beyond -10..10"
                " (the body names the field)."
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def prioritize(self, request: Request, pk: str) -> Response:
        """Set `priority` (tenants: -10 to 10, their own charts' order inside the org's share) and/or
        `high_priority` (staff only), with an optional reason recorded in the chart's history."""
        chart = self._writable(request, pk)
        levers = PrioritizeSerializer(data=request.data)
        levers.is_valid(raise_exception=True)
        data = levers.validated_data
        services.chart_prioritize(
            chart=chart,
            high_priority=data["high_priority"],
            priority=data["priority"],
            actor=actor_of(request),
            reason=data["reason"],
        )
        return self._fresh(chart)

    @extend_schema(request=ReasonSerializer, responses=ChartLeverSerializer)
    @action(detail=True, methods=["post"], url_path="move-to-top")
    def move_to_top(self, request: Request, pk: str) -> Response:
        """First among the org's own waiting charts (a tenant's priority stops at 10), with an optional
        reason recorded in the chart's history."""
        chart, reason = self._writable(request, pk), self._reason(request)
        services.chart_move_to_top(chart=chart, actor=actor_of(request), reason=reason)
        return self._fresh(chart)

    @extend_schema(request=ReasonSerializer, responses=ChartLeverSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        chart, reason = self._writable(request, pk), self._reason(request)
        services.chart_cancel(chart=chart, actor=actor_of(request), reason=reason)
        return self._fresh(chart)

    def _chart(self, pk: str) -> Chart:
        return chart_get(org_ids=visible_org_ids(self.request), chart_id=int(pk))

    def _writable(self, request: Request, pk: str) -> Chart:
        chart = self._chart(pk)
        require_write(request, chart.org_id)
        return chart

    def _reason(self, request: Request) -> str:
        return reason_read(request.data)

    def _fresh(
        self,
        chart: Chart,
        *,
        replanning: bool = True,
        code: int = status.HTTP_200_OK,
        warnings: Sequence[SubmitWarning] = (),
    ) -> Response:
        """The chart after a change, saying whether its plan fields predate it (a replan is under way:
        replanning in the request would read the whole backlog per lever, behind the replan lock)."""
        chart = chart_get(org_ids=None, chart_id=chart.pk)
        context = {"replanning": replanning, "warnings": list(warnings)}
        return Response(ChartLeverSerializer(chart, context=context).data, status=code)


_MOMENT = DateTimeField()


def _moment(value: datetime | None) -> str | None:
    """A time as the API writes it (DRF's DateTimeField), or None."""
    return None if value is None else _MOMENT.to_representation(value)
