"""Org endpoints: members read their orgs' counts and clear-time; staff steer weight, hold, caps, costs."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
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
from common.actors import actor_for
from common.api import CursorPagination, FairschedAPIView
from common.errors import InvalidInput
from orgs import services
from orgs.access import IsStaffScope, api_token_grant, api_token_revoke, visible_org_ids
from orgs.models import ApiToken, Membership, Org, Provider, Workflow
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
    ApiTokenIssuedSerializer,
    ApiTokenIssueSerializer,
    ApiTokenSerializer,
    MembershipCreateSerializer,
    MembershipRoleSerializer,
    MembershipSerializer,
    OrgCreateSerializer,
    OrgDetailSerializer,
    OrgSerializer,
    OrgUpdateSerializer,
    ProviderSerializer,
    WorkflowCostSerializer,
    WorkflowCostSetSerializer,
    WorkflowCreateSerializer,
    WorkflowSerializer,
    WorkflowTermsQuerySerializer,
    WorkflowTermsSerializer,
    WorkflowUpdateSerializer,
)
from scheduling.selectors import workflow_terms

STAFF_ACTIONS = frozenset({"create", "partial_update", "hold", "release", "costs", "cost", "members", "member"})


def _user_named(username: str) -> Any:
    """The user with this username, else a 400 naming the field (users are created in the admin)."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise InvalidInput(f"unknown user {username!r}", field="user")
    return user


def _provider_named(slug: str | None) -> Provider | None:
    if slug is None:
        return None
    provider = Provider.objects.filter(slug=slug).first()
    if provider is None:
        raise InvalidInput(f"unknown provider {slug!r}", field="provider")
    return provider


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

    @extend_schema(request=OrgCreateSerializer, responses={201: OrgDetailSerializer})
    def create(self, request: Request) -> Response:
        """Staff: create an org (the slug defaults to one made from the name; a slug in use is a 409)."""
        body = OrgCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        org = services.org_create(actor=actor_for(request.user), **body.validated_data)
        return Response(OrgDetailSerializer(org_summary(org=org)).data, status=status.HTTP_201_CREATED)

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
            user=_user_named(body.validated_data["user"]),
            org=org,
            role=body.validated_data["role"],
            actor=actor_for(request.user),
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
        actor = actor_for(request.user)
        if request.method == "DELETE":
            services.membership_remove(membership=membership, actor=actor)
            return Response(status=status.HTTP_204_NO_CONTENT)
        body = MembershipRoleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.membership_role_set(membership=membership, role=body.validated_data["role"], actor=actor)
        return Response(MembershipSerializer(membership).data)

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
    """The kinds of chart that may be submitted: anyone signed in reads them; staff register and change them."""

    serializer_class = WorkflowTermsSerializer
    pagination_class = WorkflowCursorPagination
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def get_permissions(self) -> list[BasePermission]:
        if self.action in {"create", "partial_update"}:
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

    @extend_schema(request=WorkflowCreateSerializer, responses={201: WorkflowSerializer})
    def create(self, request: Request) -> Response:
        """Staff: register a workflow (a name in use is a 409)."""
        body = WorkflowCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        data["provider"] = _provider_named(data["provider"])
        workflow = services.workflow_register(actor=actor_for(request.user), **data)
        return Response(WorkflowSerializer(workflow).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=WorkflowUpdateSerializer, responses=WorkflowSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        """Staff: change any of name, workflow type, task queue, default cost, run timeout (null: the
        deployment's default), provider (null: none) and params; runs started from now on use them."""
        workflow = workflow_get(name=name)
        body = WorkflowUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        if "provider" in data:
            data["provider"] = _provider_named(data["provider"])
        workflow = services.workflow_change(workflow=workflow, actor=actor_for(request.user), **data)
        return Response(WorkflowSerializer(workflow).data)


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


class TokenCursorPagination(CursorPagination):
    ordering = "-id"


class ApiTokenViewSet(FairschedAPIView, viewsets.GenericViewSet[ApiToken]):
    """Staff: list, issue (the secret is shown once) and revoke API tokens."""

    serializer_class = ApiTokenSerializer
    pagination_class = TokenCursorPagination
    permission_classes = [IsAuthenticated, IsStaffScope]
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[ApiToken]:
        return ApiToken.objects.select_related("user", "org")

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ApiTokenSerializer(page, many=True).data)

    @extend_schema(request=ApiTokenIssueSerializer, responses={201: ApiTokenIssuedSerializer})
    def create(self, request: Request) -> Response:
        """Issue a token scoped to one org (its user must be a member) or to staff (a staff user)."""
        body = ApiTokenIssueSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        org = org_for_input(org_ids=None, slug=data["org"]) if data["org"] else None
        token, secret = api_token_grant(
            user=_user_named(data["user"]),
            org=org,
            staff=data["staff"],
            name=data["name"],
            actor=actor_for(request.user),
        )
        token.secret = secret  # type: ignore[attr-defined]
        return Response(ApiTokenIssuedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        """Revoke the token: it stops working at once."""
        api_token_revoke(token_id=int(pk), actor=actor_for(request.user))
        return Response(status=status.HTTP_204_NO_CONTENT)
