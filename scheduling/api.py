"""Staff endpoints on the scheduler: configuration (budget, policy, ...), provider pauses, plan preview."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fairsched.actors import actor_for
from fairsched.api import CursorPagination, FairschedAPIView, IsStaffScope
from fairsched.errors import InvalidInput, NotFound
from fairsched.strict import (
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
    StrictSlugField,
)
from orgs import services as org_services
from orgs.models import Org, Provider, ProviderPause, Workflow
from orgs.selectors import provider_pauses
from orgs.services import MAX_WEIGHT
from scheduling import services
from scheduling.models import SchedulerConfig
from scheduling.services import MAX_BUDGET

STAFF = [IsAuthenticated, IsStaffScope]


class SchedulerConfigSerializer(serializers.ModelSerializer[SchedulerConfig]):
    class Meta:
        model = SchedulerConfig
        fields = [
            "budget",
            "policy",
            "quantum",
            "aging_step",
            "aging_cap",
            "replan_interval",
            "reconcile_interval",
            "dispatch_stale_after",
            "max_attempts",
            "backoff_base",
            "backoff_ceiling",
            "retry_budget_share",
            "arrival_window",
            "updated_at",
        ]
        read_only_fields = fields


class SchedulerConfigUpdateSerializer(StrictSerializer):
    """Any subset of the settings; `scheduler_config_set` checks the ranges and how they fit together."""

    budget = StrictIntegerField(required=False, min_value=1, max_value=MAX_BUDGET)
    policy = serializers.ChoiceField(choices=SchedulerConfig.Policy.choices, required=False)
    quantum = StrictFloatField(required=False)
    aging_step = StrictFloatField(required=False, allow_null=True)
    aging_cap = StrictIntegerField(required=False, min_value=0, max_value=1000)
    replan_interval = StrictFloatField(required=False)
    reconcile_interval = StrictFloatField(required=False)
    dispatch_stale_after = StrictFloatField(required=False)
    max_attempts = StrictIntegerField(required=False, min_value=1, max_value=100)
    backoff_base = StrictFloatField(required=False)
    backoff_ceiling = StrictFloatField(required=False)
    retry_budget_share = StrictFloatField(required=False, min_value=0, max_value=1)
    arrival_window = StrictFloatField(required=False, min_value=0, max_value=7 * 86400)


class SchedulerConfigView(FairschedAPIView, APIView):
    permission_classes = STAFF

    @extend_schema(responses=SchedulerConfigSerializer)
    def get(self, request: Request) -> Response:
        return Response(SchedulerConfigSerializer(SchedulerConfig.load()).data)

    @extend_schema(request=SchedulerConfigUpdateSerializer, responses=SchedulerConfigSerializer)
    def patch(self, request: Request) -> Response:
        body = SchedulerConfigUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        config = services.scheduler_config_set(actor=actor_for(request.user), **body.validated_data)
        return Response(SchedulerConfigSerializer(config).data)


class ProviderPauseSerializer(serializers.ModelSerializer[ProviderPause]):
    provider = serializers.CharField(source="provider.slug", read_only=True)
    org = serializers.SerializerMethodField(help_text="The paused org's slug; null: paused for everyone.")

    class Meta:
        model = ProviderPause
        fields = ["id", "provider", "org", "until", "reason", "created_by", "created_at"]
        read_only_fields = fields

    def get_org(self, pause: ProviderPause) -> str | None:
        return pause.org.slug if pause.org is not None else None


class ProviderPauseCreateSerializer(StrictSerializer):
    provider = StrictSlugField(max_length=100)
    org = StrictSlugField(max_length=100, required=False, allow_null=True, default=None)
    until = serializers.DateTimeField()
    reason = StrictCharField(required=False, allow_blank=True, max_length=500, default="")


class PauseCursorPagination(CursorPagination):
    ordering = "-id"


class ProviderPauseViewSet(FairschedAPIView, viewsets.GenericViewSet[ProviderPause]):
    """Staff: pause a provider for everyone or one org until a time; list the pauses; end them."""

    permission_classes = STAFF
    serializer_class = ProviderPauseSerializer
    pagination_class = PauseCursorPagination
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[ProviderPause]:
        return provider_pauses(active_only=False, now=timezone.now())

    @extend_schema(
        parameters=[OpenApiParameter("active", bool, description="Only pauses still in force (default true).")]
    )
    def list(self, request: Request) -> Response:
        active = request.query_params.get("active", "true").lower() not in {"0", "false", "no"}
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
        pause = org_services.provider_pause(
            provider=provider, org=org, until=data["until"], actor=actor_for(request.user), reason=data["reason"]
        )
        return Response(ProviderPauseSerializer(pause).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=inline_serializer("PauseEnded", {"ended": serializers.IntegerField()}))
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str) -> Response:
        """End the pause now, with any other pause in force for the same provider and org."""
        pause = ProviderPause.objects.select_related("provider", "org").filter(pk=int(pk)).first()
        if pause is None:
            raise NotFound("pause not found")
        ended = org_services.provider_resume(provider=pause.provider, org=pause.org, actor=actor_for(request.user))
        return Response({"ended": ended})


class CostChangeSerializer(StrictSerializer):
    org = StrictSlugField(max_length=100)
    workflow = StrictCharField(max_length=200)
    cost = StrictIntegerField(min_value=1, max_value=1_000_000)


class PlanChangesSerializer(StrictSerializer):
    """A proposed change; nothing is written. Unknown orgs and workflows are refused with 400."""

    weights = serializers.DictField(
        child=StrictIntegerField(min_value=0, max_value=MAX_WEIGHT),
        required=False,
        help_text="org slug -> weight",
    )
    budget = StrictIntegerField(required=False, min_value=1, max_value=MAX_BUDGET)
    costs = CostChangeSerializer(many=True, required=False)
    hold = serializers.ListField(child=StrictSlugField(max_length=100), required=False)
    release = serializers.ListField(child=StrictSlugField(max_length=100), required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        slugs = {*attrs.get("weights", {}), *attrs.get("hold", []), *attrs.get("release", [])}
        slugs |= {cost["org"] for cost in attrs.get("costs", [])}
        known = set(Org.objects.filter(slug__in=slugs).values_list("slug", flat=True))
        if slugs - known:
            raise serializers.ValidationError({"org": [f"unknown org(s): {', '.join(sorted(slugs - known))}"]})
        names = {cost["workflow"] for cost in attrs.get("costs", [])}
        known_names = set(Workflow.objects.filter(name__in=names).values_list("name", flat=True))
        if names - known_names:
            raise serializers.ValidationError(
                {"workflow": [f"unknown workflow(s): {', '.join(sorted(names - known_names))}"]}
            )
        return attrs


class BeforeAfterSerializer(serializers.Serializer[Any]):
    before = serializers.DateTimeField(allow_null=True)
    after = serializers.DateTimeField(allow_null=True)


PlanPreviewSerializer = inline_serializer(
    "PlanPreview",
    {
        "orgs": serializers.DictField(
            child=BeforeAfterSerializer(), help_text="org slug -> clear-time before and after"
        ),
        "global": BeforeAfterSerializer(help_text="The clear-time of the whole queue before and after."),
    },
)


class PlanPreviewView(FairschedAPIView, APIView):
    permission_classes = STAFF

    @extend_schema(request=PlanChangesSerializer, responses=PlanPreviewSerializer)
    def post(self, request: Request) -> Response:
        """The what-if of a proposed change: every org's clear-time and the global one, before and after."""
        from scheduling.services import plan_preview  # the scheduling loop provides it

        body = PlanChangesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(plan_preview(changes=dict(body.validated_data)))
