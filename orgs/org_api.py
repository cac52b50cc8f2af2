"""Org endpoints: members read their orgs' counts and clear-time; staff steer weight, hold, caps, costs.

An org's answer counts its charts, which are the charts app's: the project's routes give the count and
its serializer (`OrgViewSet.wired`, in `fairsched/api_urls.py`), so orgs imports nothing above it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, cast

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound as HttpNotFound
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from common.api import ETAG, IF_MATCH, CursorPagination, FairschedAPIView, if_match_check, with_etag
from common.errors import InvalidInput
from common.reasons import ReasonQuerySerializer, ReasonSerializer, reason_read
from common.strict import PageQuerySerializer
from orgs import services
from orgs.access import IsStaffScope, actor_of, visible_org_ids
from orgs.models import Membership, Org, OrgChange, Workflow
from orgs.selectors import (
    org_get,
    orgs_visible,
    user_for_input,
    workflow_cost_get,
    workflow_costs,
    workflow_turnaround_get,
    workflow_turnarounds,
)
from orgs.serializers import (
    HoldSerializer,
    MembershipCreateSerializer,
    MembershipRoleSerializer,
    MembershipSerializer,
    OrgChangeSerializer,
    OrgCreateSerializer,
    OrgSerializer,
    OrgUpdateSerializer,
    WorkflowCostListedSerializer,
    WorkflowCostSerializer,
    WorkflowCostSetSerializer,
    WorkflowTurnaroundListedSerializer,
    WorkflowTurnaroundPatchSerializer,
    WorkflowTurnaroundSerializer,
    WorkflowTurnaroundSetSerializer,
)

STAFF_ACTIONS = frozenset(
    {"create", "partial_update", "hold", "release", "costs", "cost", "members", "member", "history"}
)


class OrgSummary(Protocol):
    def __call__(self, *, org: Org) -> object: ...


class OrgCursorPagination(CursorPagination):
    ordering = "slug"


class OrgChangeCursorPagination(CursorPagination):
    ordering = "-id"


class OrgViewSet(FairschedAPIView, viewsets.GenericViewSet[Org]):
    """Staff see every org; a member sees the orgs they belong to (an org token: its one org)."""

    # An org with its charts counted, and how it looks: given by `wired`.
    org_summary: ClassVar[OrgSummary]
    detail_serializer: ClassVar[type[serializers.Serializer[Any]]]

    serializer_class = OrgSerializer
    pagination_class = OrgCursorPagination
    lookup_field = "slug"
    lookup_value_regex = "[-a-zA-Z0-9_]+"

    def get_permissions(self) -> list[BasePermission]:
        if self.action in STAFF_ACTIONS:
            return [IsAuthenticated(), IsStaffScope()]
        return [IsAuthenticated()]

    def get_queryset(self) -> QuerySet[Org]:
        return orgs_visible(org_ids=visible_org_ids(self.request))

    @classmethod
    def wired(
        cls, *, org_summary: OrgSummary, detail_serializer: type[serializers.Serializer[Any]]
    ) -> type[OrgViewSet]:
        """This viewset answering an org with `detail_serializer(org_summary(org=...))`, its schema saying so."""
        wired = type(
            cls.__name__,
            (cls,),
            {
                "__module__": cls.__module__,
                "__doc__": cls.__doc__,
                "org_summary": staticmethod(org_summary),
                "detail_serializer": detail_serializer,
            },
        )
        detail = extend_schema(responses=detail_serializer)
        return cast(
            type[OrgViewSet],
            extend_schema_view(
                create=extend_schema(responses={201: detail_serializer}),
                retrieve=detail,
                partial_update=detail,
                hold=detail,
                release=detail,
            )(wired),
        )

    def list(self, request: Request) -> Response:
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        page = self.paginate_queryset(orgs_visible(org_ids=visible_org_ids(request)))
        return self.get_paginated_response(OrgSerializer(page, many=True).data)

    @extend_schema(request=OrgCreateSerializer)
    def create(self, request: Request) -> Response:
        """Staff: create an org (the slug defaults to one made from the name; a slug in use is a 409)."""
        body = OrgCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        org = services.org_create(actor=actor_of(request), **body.validated_data)
        return Response(self._detail(org), status=status.HTTP_201_CREATED)

    @extend_schema(methods=["GET"], responses=MembershipSerializer(many=True))
    @extend_schema(methods=["POST"], request=MembershipCreateSerializer, responses={201: MembershipSerializer})
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def members(self, request: Request, slug: str) -> Response:
        """Staff: the org's members (GET), or make an existing user a member with a role (POST; 409 if
        they are one already)."""
        org = org_get(org_ids=None, slug=slug)
        if request.method == "GET":
            members = Membership.objects.filter(org=org).select_related("user", "org").order_by("user__username")
            return Response(MembershipSerializer(members, many=True).data)
        body = MembershipCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.membership_create(
            user=user_for_input(body.validated_data["user"]),
            org=org,
            role=body.validated_data["role"],
            actor=actor_of(request),
        )
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(methods=["PATCH"], request=MembershipRoleSerializer, responses=MembershipSerializer)
    @extend_schema(methods=["DELETE"], request=None, responses={204: None})
    @action(detail=True, methods=["patch", "delete"], url_path=r"members/(?P<username>[^/]+)")
    def member(self, request: Request, slug: str, username: str) -> Response:
        """Staff: change a member's role (PATCH) or remove them from the org (DELETE)."""
        org = org_get(org_ids=None, slug=slug)
        membership = (
            Membership.objects.select_related("user", "org").filter(org=org, user__username=username).first()
            if "\x00" not in username
            else None
        )
        if membership is None:
            raise HttpNotFound("membership not found")
        actor = actor_of(request)
        if request.method == "DELETE":
            services.membership_remove(membership=membership, actor=actor)
            return Response(status=status.HTTP_204_NO_CONTENT)
        body = MembershipRoleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.membership_role_set(membership=membership, role=body.validated_data["role"], actor=actor)
        return Response(MembershipSerializer(membership).data)

    @extend_schema(parameters=[ETAG])
    def retrieve(self, request: Request, slug: str) -> Response:
        org = org_get(org_ids=visible_org_ids(request), slug=slug)
        return with_etag(Response(self._detail(org)), org)

    @extend_schema(parameters=[IF_MATCH, ETAG], request=OrgUpdateSerializer)
    def partial_update(self, request: Request, slug: str) -> Response:
        """Staff: change weight (0 holds), max_concurrency (null: no cap), queue_limit (null: none),
        turnaround (seconds; null: no promise) and turnaround_share (in (0, 1]; null: not said)."""
        org = org_get(org_ids=None, slug=slug)
        body = OrgUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data, actor = body.validated_data, actor_of(request)
        # One transaction: a stale If-Match, or a later field's refusal, undoes the earlier ones.
        with transaction.atomic():
            if_match_check(request, lambda: Org.objects.select_for_update().get(pk=org.pk))
            if "weight" in data:
                org = services.org_weight_set(org=org, weight=data["weight"], actor=actor, reason=data["reason"])
            if "max_concurrency" in data:
                org = services.org_cap_set(
                    org=org, max_concurrency=data["max_concurrency"], actor=actor, reason=data["reason"]
                )
            if "queue_limit" in data:
                org = services.org_queue_limit_set(
                    org=org, queue_limit=data["queue_limit"], actor=actor, reason=data["reason"]
                )
            if "turnaround" in data:
                org = services.org_turnaround_set(
                    org=org, turnaround=data["turnaround"], actor=actor, reason=data["reason"]
                )
            if "turnaround_share" in data:
                org = services.org_turnaround_share_set(
                    org=org, share=data["turnaround_share"], actor=actor, reason=data["reason"]
                )
        org = org_get(org_ids=None, slug=slug)
        return with_etag(Response(self._detail(org)), org)

    @extend_schema(parameters=[ETAG], request=HoldSerializer)
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, slug: str) -> Response:
        """Staff: hold the org (weight 0); its charts stay queued and never dispatch. The reason is
        written for the customer: the org's members see it as `hold_reason` until the release."""
        org = org_get(org_ids=None, slug=slug)
        services.org_hold(org=org, actor=actor_of(request), reason=self._reason(request, HoldSerializer))
        org = org_get(org_ids=None, slug=slug)
        return with_etag(Response(self._detail(org)), org)

    @extend_schema(parameters=[ETAG], request=ReasonSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, slug: str) -> Response:
        """Staff: release a held org, restoring its weight from before the hold."""
        org = org_get(org_ids=None, slug=slug)
        services.org_release(org=org, actor=actor_of(request), reason=self._reason(request))
        org = org_get(org_ids=None, slug=slug)
        return with_etag(Response(self._detail(org)), org)

    @extend_schema(responses=WorkflowCostListedSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def costs(self, request: Request, slug: str) -> Response:
        """Staff: the org's per-workflow cost overrides, each with its ETag (for If-Match)."""
        org = org_get(org_ids=None, slug=slug)
        return Response(WorkflowCostListedSerializer(workflow_costs(org=org), many=True).data)

    @extend_schema(methods=["GET"], parameters=[ETAG], responses=WorkflowCostSerializer)
    @extend_schema(
        methods=["PUT"],
        parameters=[IF_MATCH, ETAG],
        request=WorkflowCostSetSerializer,
        responses=WorkflowCostSerializer,
    )
    @extend_schema(
        methods=["DELETE"],
        parameters=[IF_MATCH, ReasonQuerySerializer],
        description="Staff: remove the org's cost override for the workflow: its default applies again. The"
        ' reason, optional, goes in the query (`?reason=...`) or in a JSON body `{"reason": "..."}`, not both.',
        responses={204: None},
    )
    @action(detail=True, methods=["get", "put", "delete"], url_path=r"costs/(?P<workflow>[^/]+)")
    def cost(self, request: Request, slug: str, workflow: str) -> Response:
        """Staff: what one run costs the org (GET; `cost` null: the workflow's default applies), set it
        (PUT) or remove it (DELETE, back to the workflow's default; its optional body: a reason)."""
        org = org_get(org_ids=None, slug=slug)
        found = Workflow.objects.filter(name=workflow).first() if "\x00" not in workflow else None
        if found is None:
            raise HttpNotFound("workflow not found")
        if request.method == "GET":
            override = workflow_cost_get(org=org, workflow=found)
            return with_etag(Response(WorkflowCostSerializer(override).data), override)
        actor = actor_of(request)
        body = WorkflowCostSetSerializer(data=request.data) if request.method == "PUT" else None
        if body is not None:
            body.is_valid(raise_exception=True)
        reason = self._removal_reason(request) if body is None else body.validated_data["reason"]
        with transaction.atomic():
            if_match_check(request, lambda: workflow_cost_get(org=org, workflow=found, for_update=True))
            if body is None:
                services.workflow_cost_set(org=org, workflow=found, cost=None, actor=actor, reason=reason)
                return Response(status=status.HTTP_204_NO_CONTENT)
            services.workflow_cost_set(
                org=org,
                workflow=found,
                cost=body.validated_data["cost"],
                actor=actor,
                reason=reason,
            )
        override = workflow_cost_get(org=org, workflow=found)
        return with_etag(Response(WorkflowCostSerializer(override).data), override)

    @extend_schema(responses=WorkflowTurnaroundListedSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def turnarounds(self, request: Request, slug: str) -> Response:
        """The org's per-workflow turnaround promises, each with its ETag (for If-Match). Its members
        read them too; only staff set them."""
        org = org_get(org_ids=visible_org_ids(request), slug=slug)
        return Response(WorkflowTurnaroundListedSerializer(workflow_turnarounds(org=org), many=True).data)

    @extend_schema(methods=["GET"], parameters=[ETAG], responses=WorkflowTurnaroundSerializer)
    @extend_schema(
        methods=["PUT"],
        parameters=[IF_MATCH, ETAG],
        request=WorkflowTurnaroundSetSerializer,
        responses=WorkflowTurnaroundSerializer,
    )
    @extend_schema(
        methods=["PATCH"],
        parameters=[IF_MATCH, ETAG],
        request=WorkflowTurnaroundPatchSerializer,
        responses=WorkflowTurnaroundSerializer,
    )
    @extend_schema(
        methods=["DELETE"],
        parameters=[IF_MATCH, ReasonQuerySerializer],
        description="Staff: remove the org's turnaround for the workflow: the org's own applies again. The"
        ' reason, optional, goes in the query (`?reason=...`) or in a JSON body `{"reason": "..."}`, not both.',
        responses={204: None},
    )
    @action(detail=True, methods=["get", "put", "patch", "delete"], url_path=r"turnarounds/(?P<workflow>[^/]+)")
    def turnaround(self, request: Request, slug: str, workflow: str) -> Response:
        """The org's turnaround promise for one workflow (GET, members too; `turnaround` null: the org's
        applies); staff set it (PUT), change one of its fields (PATCH) or remove it (DELETE). A tenant's
        write is a 403 naming the field."""
        org = org_get(org_ids=visible_org_ids(request), slug=slug)
        found = Workflow.objects.filter(name=workflow).first() if "\x00" not in workflow else None
        if found is None:
            raise HttpNotFound("workflow not found")
        if request.method == "GET":
            override = workflow_turnaround_get(org=org, workflow=found)
            return with_etag(Response(WorkflowTurnaroundSerializer(override).data), override)
        actor = actor_of(request)
        actor.staff_required(field="turnaround", what="turnaround targets")
        body: serializers.Serializer[Any] | None = None
        if request.method == "PUT":
            body = WorkflowTurnaroundSetSerializer(data=request.data)
        elif request.method == "PATCH":
            body = WorkflowTurnaroundPatchSerializer(data=request.data)
        if body is not None:
            body.is_valid(raise_exception=True)
        reason = self._removal_reason(request) if body is None else body.validated_data["reason"]
        with transaction.atomic():
            current = workflow_turnaround_get(org=org, workflow=found, for_update=True)
            if_match_check(request, lambda: current)
            if body is None:
                services.workflow_turnaround_set(org=org, workflow=found, turnaround=None, actor=actor, reason=reason)
                return Response(status=status.HTTP_204_NO_CONTENT)
            data = body.validated_data
            turnaround = data.get("turnaround", current.turnaround)
            if turnaround is None:
                raise InvalidInput(
                    "the org has no turnaround for this workflow to change: PUT one with its turnaround",
                    field="turnaround",
                )
            services.workflow_turnaround_set(
                org=org,
                workflow=found,
                turnaround=turnaround,
                share=data.get("share", current.share if request.method == "PATCH" else None),
                actor=actor,
                reason=reason,
            )
        override = workflow_turnaround_get(org=org, workflow=found)
        return with_etag(Response(WorkflowTurnaroundSerializer(override).data), override)

    @extend_schema(responses=OrgChangeSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=OrgChangeCursorPagination)
    def history(self, request: Request, slug: str) -> Response:
        """Staff: the org's change history, newest first: who pulled which lever, from what to what,
        and the reason given."""
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        org = org_get(org_ids=None, slug=slug)
        paginator = OrgChangeCursorPagination()
        page = paginator.paginate_queryset(OrgChange.objects.filter(org=org), request, view=self) or []
        return paginator.get_paginated_response(OrgChangeSerializer(page, many=True).data)

    def _detail(self, org: Org) -> Any:
        return self.detail_serializer(self.org_summary(org=org)).data

    def _removal_reason(self, request: Request) -> str:
        """A DELETE's reason: in the query (`ReasonQuerySerializer`) or in the body, not in both."""
        query = ReasonQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        in_body = self._reason(request)
        if "reason" in request.query_params and isinstance(request.data, dict) and "reason" in request.data:
            raise InvalidInput("give the reason once: in the query (?reason=) or in the body", field="reason")
        text: str = query.validated_data["reason"]
        return text or in_body

    def _reason(self, request: Request, serializer: type[ReasonSerializer | HoldSerializer] = ReasonSerializer) -> str:
        return reason_read(request.data, serializer)
