"""Staff endpoints on the scheduler: configuration (budget, policy, ...), provider pauses, plan preview."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from charts.levers import PRIORITY
from charts.serializers import ReasonSerializer
from common.api import ETAG, IF_MATCH, CursorPagination, FairschedAPIView, if_match_check, with_etag
from common.bounds import Number
from common.errors import InvalidInput, NotFound
from common.strict import (
    PageQuerySerializer,
    ReasonField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictQuerySerializer,
    StrictSerializer,
    StrictSlugField,
)
from orgs import services as org_services
from orgs.access import IsStaffScope, actor_of
from orgs.levers import COST, MAX_CONCURRENCY, QUEUE_LIMIT, WEIGHT
from orgs.models import Org, Provider, ProviderPause, Workflow
from orgs.selectors import provider_pauses
from scheduling import services
from scheduling.levers import AGING_CAP, BUDGET, CONFIG_BOUNDS, MAX_ATTEMPTS
from scheduling.models import ConfigChange, SchedulerConfig
from scheduling.what_if import plan_preview

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


class ConfigNumberField(StrictFloatField):
    """A configuration number whose schema states its bound (`CONFIG_BOUNDS`, which the service checks)."""

    def __init__(self, *, name: str, **kwargs: Any) -> None:
        # The field's schema (drf-spectacular reads this attribute), set here: DRF copies fields anew.
        bound = CONFIG_BOUNDS[name]
        assert isinstance(bound, Number), name
        self._spectacular_annotation = {"field": bound.schema}
        super().__init__(required=False, **kwargs)


class SchedulerConfigUpdateSerializer(StrictSerializer):
    """Any subset of the settings; `scheduler_config_set` checks the ranges and how they fit together."""

    budget = StrictIntegerField(required=False, **BUDGET.limits)
    policy = serializers.ChoiceField(choices=SchedulerConfig.Policy.choices, required=False)
    quantum = ConfigNumberField(name="quantum")
    aging_step = ConfigNumberField(name="aging_step", allow_null=True)
    aging_cap = StrictIntegerField(required=False, **AGING_CAP.limits)
    replan_interval = ConfigNumberField(name="replan_interval")
    reconcile_interval = ConfigNumberField(name="reconcile_interval")
    dispatch_stale_after = ConfigNumberField(name="dispatch_stale_after")
    max_attempts = StrictIntegerField(required=False, **MAX_ATTEMPTS.limits)
    backoff_base = ConfigNumberField(name="backoff_base")
    backoff_ceiling = ConfigNumberField(name="backoff_ceiling")
    retry_budget_share = ConfigNumberField(name="retry_budget_share")
    arrival_window = ConfigNumberField(name="arrival_window")
    reason = ReasonField()


class ConfigChangeSerializer(serializers.ModelSerializer[ConfigChange]):
    """One line of the configuration's change log: who changed which setting, from what to what, why."""

    class Meta:
        model = ConfigChange
        fields = ["id", "at", "actor", "field", "old_value", "new_value", "reason"]
        read_only_fields = fields


class ConfigChangeCursorPagination(CursorPagination):
    ordering = "-id"


class SchedulerConfigHistoryView(FairschedAPIView, ListAPIView[ConfigChange]):
    """Staff: the configuration's change log, newest first, with each change's reason."""

    permission_classes = STAFF
    serializer_class = ConfigChangeSerializer
    pagination_class = ConfigChangeCursorPagination

    def get_queryset(self) -> QuerySet[ConfigChange]:
        return ConfigChange.objects.all()

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        PageQuerySerializer(data=request.query_params).is_valid(raise_exception=True)
        return super().get(request, *args, **kwargs)


class SchedulerConfigView(FairschedAPIView, APIView):
    permission_classes = STAFF

    @extend_schema(parameters=[ETAG], responses=SchedulerConfigSerializer)
    def get(self, request: Request) -> Response:
        config = SchedulerConfig.load()
        return with_etag(Response(SchedulerConfigSerializer(config).data), config)

    @extend_schema(
        parameters=[IF_MATCH, ETAG], request=SchedulerConfigUpdateSerializer, responses=SchedulerConfigSerializer
    )
    def patch(self, request: Request) -> Response:
        body = SchedulerConfigUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            if_match_check(
                request, lambda: SchedulerConfig.objects.select_for_update().get(pk=SchedulerConfig.load().pk)
            )
            services.scheduler_config_set(actor=actor_of(request), **body.validated_data)
        config = SchedulerConfig.load()  # as stored, for the ETag a GET will answer
        return with_etag(Response(SchedulerConfigSerializer(config).data), config)


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
    reason = ReasonField()


class ProviderPauseQuerySerializer(StrictQuerySerializer):
    active = serializers.BooleanField(required=False, default=True, help_text="Only pauses still in force.")


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
        pause = org_services.provider_pause(
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
        ended = org_services.provider_resume(
            provider=pause.provider, org=pause.org, actor=actor_of(request), reason=body.validated_data["reason"]
        )
        return Response({"ended": ended})


class CostChangeSerializer(StrictSerializer):
    org = StrictSlugField(max_length=100)
    workflow = StrictCharField(max_length=200)
    cost = StrictIntegerField(**COST.limits, allow_null=True, help_text="null: back to the workflow's default cost")


class PriorityChangeSerializer(StrictSerializer):
    chart = StrictIntegerField(min_value=1, help_text="The id of a waiting chart.")
    priority = StrictIntegerField(required=False, **PRIORITY.limits)
    high_priority = StrictBooleanField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.keys() & {"priority", "high_priority"}:
            raise serializers.ValidationError({"priority": ["give priority or high_priority"]})
        return attrs


class ProviderResumeChangeSerializer(StrictSerializer):
    provider = StrictSlugField(max_length=100)
    org = StrictSlugField(max_length=100, required=False, allow_null=True, help_text="null: the pause for everyone")


class ProviderPauseChangeSerializer(ProviderResumeChangeSerializer):
    until = serializers.DateTimeField()


class PlanChangesSerializer(StrictSerializer):
    """A proposed change of any lever; nothing is written. Unknown levers, orgs, workflows, providers
    and charts are refused with 400 naming the field."""

    weights = serializers.DictField(
        child=StrictIntegerField(**WEIGHT.limits), required=False, help_text="org slug -> weight"
    )
    hold = serializers.ListField(child=StrictSlugField(max_length=100), required=False)
    release = serializers.ListField(child=StrictSlugField(max_length=100), required=False)
    caps = serializers.DictField(
        child=StrictIntegerField(**MAX_CONCURRENCY.limits, allow_null=True),
        required=False,
        help_text="org slug -> max running charts (null: no cap)",
    )
    queue_limits = serializers.DictField(
        child=StrictIntegerField(**QUEUE_LIMIT.limits, allow_null=True),
        required=False,
        help_text="org slug -> queue limit (null: none); it refuses new submissions, moves no queued chart",
    )
    budget = StrictIntegerField(required=False, **BUDGET.limits)
    policy = serializers.ChoiceField(choices=SchedulerConfig.Policy.choices, required=False)
    quantum = StrictFloatField(required=False)
    aging_step = StrictFloatField(required=False, allow_null=True)
    aging_cap = StrictIntegerField(required=False, **AGING_CAP.limits)
    costs = CostChangeSerializer(many=True, required=False)
    priorities = PriorityChangeSerializer(many=True, required=False)
    provider_pauses = ProviderPauseChangeSerializer(many=True, required=False)
    provider_resumes = ProviderResumeChangeSerializer(many=True, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        slugs = {*attrs.get("weights", {}), *attrs.get("caps", {}), *attrs.get("queue_limits", {})}
        slugs |= {*attrs.get("hold", []), *attrs.get("release", [])}
        slugs |= {cost["org"] for cost in attrs.get("costs", [])}
        pauses = [*attrs.get("provider_pauses", []), *attrs.get("provider_resumes", [])]
        slugs |= {pause["org"] for pause in pauses if pause.get("org")}
        known = set(Org.objects.filter(slug__in=slugs).values_list("slug", flat=True))
        if slugs - known:
            raise serializers.ValidationError({"org": [f"unknown org(s): {', '.join(sorted(slugs - known))}"]})
        names = {cost["workflow"] for cost in attrs.get("costs", [])}
        known_names = set(Workflow.objects.filter(name__in=names).values_list("name", flat=True))
        if names - known_names:
            raise serializers.ValidationError(
                {"workflow": [f"unknown workflow(s): {', '.join(sorted(names - known_names))}"]}
            )
        providers = {pause["provider"] for pause in pauses}
        known_providers = set(Provider.objects.filter(slug__in=providers).values_list("slug", flat=True))
        if providers - known_providers:
            unknown = ", ".join(sorted(providers - known_providers))
            raise serializers.ValidationError({"provider": [f"unknown provider(s): {unknown}"]})
        return attrs


class BeforeAfterSerializer(serializers.Serializer[Any]):
    before = serializers.DateTimeField(allow_null=True)
    after = serializers.DateTimeField(allow_null=True)


class OrgPreviewSerializer(BeforeAfterSerializer):
    charts_earlier = serializers.IntegerField(help_text="Charts of the org whose ETA moves earlier (by 1 s or more).")
    charts_later = serializers.IntegerField()
    charts_unplanned = serializers.IntegerField(help_text="Charts that had an ETA and would have none.")
    most_earlier_seconds = serializers.FloatField()
    most_later_seconds = serializers.FloatField()
    queued = serializers.IntegerField(help_text="The org's waiting charts.")
    queue_full = serializers.BooleanField(help_text="Under the proposed queue limit, new submissions are refused.")


class ChartMoveSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    org = serializers.CharField()
    before = serializers.DateTimeField(allow_null=True)
    after = serializers.DateTimeField(allow_null=True)
    moved_seconds = serializers.FloatField(allow_null=True, help_text="after - before; null: planned on one side only")


PlanPreviewSerializer = inline_serializer(
    "PlanPreview",
    {
        "orgs": serializers.DictField(
            child=OrgPreviewSerializer(), help_text="org slug -> clear-time before and after, and its charts' moves"
        ),
        "global": BeforeAfterSerializer(help_text="The clear-time of the whole queue before and after."),
        "charts_moved": serializers.IntegerField(help_text="How many charts' ETAs move by 1 s or more."),
        "charts": ChartMoveSerializer(many=True, help_text="The charts that move most (at most 25), largest first."),
    },
)


class PlanPreviewView(FairschedAPIView, APIView):
    permission_classes = STAFF

    @extend_schema(request=PlanChangesSerializer, responses=PlanPreviewSerializer)
    def post(self, request: Request) -> Response:
        """The what-if of a proposed change of any lever, replanned in memory from one snapshot: every
        org's clear-time and the global one before and after, and the charts whose ETAs move most."""
        body = PlanChangesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(plan_preview(changes=body.validated_data))
