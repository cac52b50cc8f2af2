"""Provider, provider pause and API token endpoints (orgs and workflows: `org_api`, `workflow_api`)."""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import CursorPagination, FairschedAPIView
from common.errors import InvalidInput, NotFound
from common.reasons import ReasonSerializer
from common.strict import PageQuerySerializer
from orgs import services
from orgs.access import IsStaffScope, actor_of, api_token_grant, api_token_revoke, visible_org_ids
from orgs.models import ApiToken, Org, Provider, ProviderPause
from orgs.selectors import (
    org_for_input,
    provider_get,
    provider_pauses,
    providers_visible,
    user_for_input,
    viewer_zone,
)
from orgs.serializers import (
    ApiTokenIssuedSerializer,
    ApiTokenIssueSerializer,
    ApiTokenSerializer,
    ProviderPauseCreateSerializer,
    ProviderPauseQuerySerializer,
    ProviderPauseSerializer,
    ProviderResumeResultSerializer,
    ProviderResumeSerializer,
    ProviderSerializer,
    ViewerZoneSerializer,
)


class ProviderCursorPagination(CursorPagination):
    ordering = "slug"


class ProviderViewSet(FairschedAPIView, viewsets.GenericViewSet[Provider]):
    """The providers that workflows call, with the pauses in force that apply to the caller: those for
    everyone and those of the caller's orgs, never another org's (staff see every pause)."""

    serializer_class = ProviderSerializer
    pagination_class = ProviderCursorPagination
    lookup_field = "slug"
    lookup_value_regex = "[-a-zA-Z0-9_]+"

    def get_permissions(self) -> list[BasePermission]:
        if self.action == "resume":
            return [IsAuthenticated(), IsStaffScope()]
        return [IsAuthenticated()]

    def get_queryset(self) -> QuerySet[Provider]:
        return providers_visible(org_ids=visible_org_ids(self.request), now=timezone.now())

    def list(self, request: Request) -> Response:
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ProviderSerializer(page, many=True).data)

    def retrieve(self, request: Request, slug: str) -> Response:
        provider = provider_get(org_ids=visible_org_ids(request), now=timezone.now(), slug=slug)
        return Response(ProviderSerializer(provider).data)

    @extend_schema(request=ProviderResumeSerializer, responses=ProviderResumeResultSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, slug: str) -> Response:
        """Staff: end the provider's pauses in force for one org (`org`), or its pause for everyone
        (`org` null or absent); `ended` counts them (0: it was not paused so)."""
        provider = provider_get(org_ids=None, now=timezone.now(), slug=slug)
        body = ProviderResumeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        org = org_for_input(org_ids=None, slug=body.validated_data["org"]) if body.validated_data["org"] else None
        ended = services.provider_resume(
            provider=provider, org=org, actor=actor_of(request), reason=body.validated_data["reason"]
        )
        return Response({"ended": ended})


class PauseCursorPagination(CursorPagination):
    ordering = "-id"


class ProviderPauseViewSet(FairschedAPIView, viewsets.GenericViewSet[ProviderPause]):
    """Staff: pause a provider for everyone or one org until a time; list the pauses; end them."""

    permission_classes = [IsAuthenticated, IsStaffScope]
    serializer_class = ProviderPauseSerializer
    pagination_class = PauseCursorPagination
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[ProviderPause]:
        return provider_pauses(active_only=False, now=timezone.now())

    @extend_schema(parameters=[ProviderPauseQuerySerializer])
    def list(self, request: Request) -> Response:
        query = ProviderPauseQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        active = query.validated_data["active"]
        page = self.paginate_queryset(provider_pauses(active_only=active, now=timezone.now()))
        return self.get_paginated_response(ProviderPauseSerializer(page, many=True).data)

    @extend_schema(request=ProviderPauseCreateSerializer, responses={201: ProviderPauseSerializer})
    def create(self, request: Request) -> Response:
        body = ProviderPauseCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        provider = Provider.objects.filter(slug=data["provider"]).first()
        if provider is None:
            raise InvalidInput(f"unknown provider {data['provider']!r}", field="provider")
        org = None
        if data["org"]:
            org = Org.objects.filter(slug=data["org"]).first()
            if org is None:
                raise InvalidInput(f"unknown org {data['org']!r}", field="org")
        pause = services.provider_pause(
            provider=provider, org=org, until=data["until"], actor=actor_of(request), reason=data["reason"]
        )
        return Response(ProviderPauseSerializer(pause).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=ReasonSerializer, responses=inline_serializer("PauseEnded", {"ended": serializers.IntegerField()})
    )
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str) -> Response:
        """End the pause now, with any other pause in force for the same provider and org."""
        pause = ProviderPause.objects.select_related("provider", "org").filter(pk=int(pk)).first()
        if pause is None:
            raise NotFound("pause not found")
        body = ReasonSerializer(data=request.data if isinstance(request.data, dict) else {})
        body.is_valid(raise_exception=True)
        ended = services.provider_resume(
            provider=pause.provider, org=pause.org, actor=actor_of(request), reason=body.validated_data["reason"]
        )
        return Response({"ended": ended})


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
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
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
            user=user_for_input(data["user"]),
            org=org,
            staff=data["staff"],
            name=data["name"],
            actor=actor_of(request),
        )
        token.secret = secret  # type: ignore[attr-defined]
        return Response(ApiTokenIssuedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        """Revoke the token: it stops working at once."""
        api_token_revoke(token_id=int(pk), actor=actor_of(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ViewerZoneView(FairschedAPIView, APIView):
    """The zone the signed-in user reads times in on the portal, the dashboard and the admin (the
    pages' zone picker sets it; every browser of the account shows it). Null: the browser's zone."""

    @extend_schema(responses=ViewerZoneSerializer)
    def get(self, request: Request) -> Response:
        return Response({"zone": viewer_zone(user_id=request.user.pk)})

    @extend_schema(request=ViewerZoneSerializer, responses=ViewerZoneSerializer)
    def put(self, request: Request) -> Response:
        body = ViewerZoneSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = cast(User, request.user)  # signed in (IsAuthenticated, the default permission)
        return Response({"zone": services.viewer_zone_set(user=user, zone=body.validated_data["zone"])})
