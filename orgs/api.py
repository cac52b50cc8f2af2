"""Org endpoints: members read their orgs' counts and clear-time; staff steer weight, hold, caps, costs."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound as HttpNotFound
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from charts.serializers import ReasonSerializer
from fairsched.actors import actor_for
from fairsched.api import CursorPagination, FairschedAPIView, IsStaffScope, visible_org_ids
from orgs import services
from orgs.models import Org, Provider, Workflow
from orgs.selectors import (
    org_for_input,
    org_get,
    org_summary,
    orgs_visible,
    provider_get,
    providers_visible,
    workflow_costs,
    workflow_get,
    workflows_all,
)
from orgs.serializers import (
    OrgDetailSerializer,
    OrgSerializer,
    OrgUpdateSerializer,
    ProviderSerializer,
    WorkflowCostSerializer,
    WorkflowCostSetSerializer,
    WorkflowTermsQuerySerializer,
    WorkflowTermsSerializer,
    WorkflowUpdateSerializer,
)
from scheduling.selectors import workflow_terms

STAFF_ACTIONS = frozenset({"partial_update", "hold", "release", "costs", "cost"})


class OrgCursorPagination(CursorPagination):
    ordering = "slug"


class OrgViewSet(FairschedAPIView, viewsets.GenericViewSet[Org]):
    """Staff see every org; a member sees the orgs they belong to (an org token: its one org)."""

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

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(orgs_visible(org_ids=visible_org_ids(request)))
        return self.get_paginated_response(OrgSerializer(page, many=True).data)

    @extend_schema(responses=OrgDetailSerializer)
    def retrieve(self, request: Request, slug: str) -> Response:
        org = org_get(org_ids=visible_org_ids(request), slug=slug)
        return Response(OrgDetailSerializer(org_summary(org=org)).data)

    @extend_schema(request=OrgUpdateSerializer, responses=OrgDetailSerializer)
    def partial_update(self, request: Request, slug: str) -> Response:
        """Staff: change weight (0 holds), max_concurrency (null: no cap) and queue_limit (null: none)."""
        org = org_get(org_ids=None, slug=slug)
        body = OrgUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data, actor = body.validated_data, actor_for(request.user)
        # One transaction: a later field's refusal undoes the earlier ones.
        with transaction.atomic():
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
        return Response(OrgDetailSerializer(org_summary(org=org_get(org_ids=None, slug=slug))).data)

    @extend_schema(request=ReasonSerializer, responses=OrgDetailSerializer)
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, slug: str) -> Response:
        """Staff: hold the org (weight 0); its charts stay queued and never dispatch."""
        org = org_get(org_ids=None, slug=slug)
        services.org_hold(org=org, actor=actor_for(request.user), reason=self._reason(request))
        return Response(OrgDetailSerializer(org_summary(org=org_get(org_ids=None, slug=slug))).data)

    @extend_schema(request=ReasonSerializer, responses=OrgDetailSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, slug: str) -> Response:
        """Staff: release a held org, restoring its weight from before the hold."""
        org = org_get(org_ids=None, slug=slug)
        services.org_release(org=org, actor=actor_for(request.user), reason=self._reason(request))
        return Response(OrgDetailSerializer(org_summary(org=org_get(org_ids=None, slug=slug))).data)

    @extend_schema(responses=WorkflowCostSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def costs(self, request: Request, slug: str) -> Response:
        """Staff: the org's per-workflow cost overrides."""
        org = org_get(org_ids=None, slug=slug)
        return Response(WorkflowCostSerializer(workflow_costs(org=org), many=True).data)

    @extend_schema(methods=["PUT"], request=WorkflowCostSetSerializer, responses=WorkflowCostSerializer)
    @extend_schema(methods=["DELETE"], request=None, responses={204: None})
    @action(detail=True, methods=["put", "delete"], url_path=r"costs/(?P<workflow>[^/]+)")
    def cost(self, request: Request, slug: str, workflow: str) -> Response:
        """Staff: set (PUT) or remove (DELETE, back to the workflow's default) what one run costs the org."""
        org = org_get(org_ids=None, slug=slug)
        found = Workflow.objects.filter(name=workflow).first() if "\x00" not in workflow else None
        if found is None:
            raise HttpNotFound("workflow not found")
        actor = actor_for(request.user)
        if request.method == "DELETE":
            services.workflow_cost_set(org=org, workflow=found, cost=None, actor=actor)
            return Response(status=status.HTTP_204_NO_CONTENT)
        body = WorkflowCostSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        services.workflow_cost_set(
            org=org, workflow=found, cost=body.validated_data["cost"], actor=actor, reason=body.validated_data["reason"]
        )
        return Response({"workflow": found.name, "cost": body.validated_data["cost"]})

    def _reason(self, request: Request) -> str:
        body = ReasonSerializer(data=request.data if isinstance(request.data, dict) else {})
        body.is_valid(raise_exception=True)
        reason: str = body.validated_data["reason"]
        return reason


class WorkflowCursorPagination(CursorPagination):
    ordering = "name"


class WorkflowViewSet(FairschedAPIView, viewsets.GenericViewSet[Workflow]):
    """The kinds of chart that may be submitted: anyone signed in reads them; staff set run timeouts."""

    serializer_class = WorkflowTermsSerializer
    pagination_class = WorkflowCursorPagination
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def get_permissions(self) -> list[BasePermission]:
        if self.action == "partial_update":
            return [IsAuthenticated(), IsStaffScope()]
        return [IsAuthenticated()]

    def get_queryset(self) -> QuerySet[Workflow]:
        return workflows_all()

    @extend_schema(parameters=[WorkflowTermsQuerySerializer], responses=WorkflowTermsSerializer(many=True))
    def list(self, request: Request) -> Response:
        """Every workflow, with its cost and expected duration for the caller's org (`?org=` names one)."""
        org = self._terms_org(request)
        page = self.paginate_queryset(workflows_all()) or []
        return self.get_paginated_response(
            WorkflowTermsSerializer(workflow_terms(workflows=page, org=org), many=True).data
        )

    @extend_schema(parameters=[WorkflowTermsQuerySerializer], responses=WorkflowTermsSerializer)
    def retrieve(self, request: Request, name: str) -> Response:
        (terms,) = workflow_terms(workflows=[workflow_get(name=name)], org=self._terms_org(request))
        return Response(WorkflowTermsSerializer(terms).data)

    def _terms_org(self, request: Request) -> Org | None:
        """The org named by `?org=` (unknown and foreign slugs: the same 400), else the caller's only
        org, else none (staff, or a member of several orgs)."""
        query = WorkflowTermsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        org_ids = visible_org_ids(request)
        slug = query.validated_data.get("org")
        if slug or (org_ids is not None and len(org_ids) == 1):
            return org_for_input(org_ids=org_ids, slug=slug)
        return None

    @extend_schema(request=WorkflowUpdateSerializer, responses=WorkflowTermsSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        """Staff: set the run timeout (seconds; null for the deployment's default) of runs started from now on."""
        workflow = workflow_get(name=name)
        body = WorkflowUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workflow = services.workflow_run_timeout_set(
            workflow=workflow, run_timeout=body.validated_data["run_timeout"], actor=actor_for(request.user)
        )
        (terms,) = workflow_terms(workflows=[workflow], org=self._terms_org(request))
        return Response(WorkflowTermsSerializer(terms).data)


class ProviderCursorPagination(CursorPagination):
    ordering = "slug"


class ProviderViewSet(FairschedAPIView, viewsets.GenericViewSet[Provider]):
    """The providers that workflows call, with the pauses in force that apply to the caller: those for
    everyone and those of the caller's orgs, never another org's (staff see every pause)."""

    serializer_class = ProviderSerializer
    pagination_class = ProviderCursorPagination
    permission_classes = [IsAuthenticated]
    lookup_field = "slug"
    lookup_value_regex = "[-a-zA-Z0-9_]+"

    def get_queryset(self) -> QuerySet[Provider]:
        return providers_visible(org_ids=visible_org_ids(self.request), now=timezone.now())

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ProviderSerializer(page, many=True).data)

    def retrieve(self, request: Request, slug: str) -> Response:
        provider = provider_get(org_ids=visible_org_ids(request), now=timezone.now(), slug=slug)
        return Response(ProviderSerializer(provider).data)
