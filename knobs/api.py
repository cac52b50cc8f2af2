"""Staff endpoints on the scheduler's configuration: read and change it (budget, policy, ...), its change log."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import ETAG, IF_MATCH, CursorPagination, FairschedAPIView, if_match_check, with_etag
from common.bounds import Number
from common.strict import (
    PageQuerySerializer,
    ReasonField,
    StrictBooleanField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from knobs.levers import AGING_CAP, BUDGET, CONFIG_BOUNDS, MAX_ATTEMPTS, RESCUE_MAX_BUDGET, RESCUE_MAX_WEIGHT
from knobs.models import ConfigChange, SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.access import IsStaffScope, actor_of

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
            "at_risk_threshold",
            "due_first",
            "rescue_max_budget",
            "rescue_max_weight",
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
    at_risk_threshold = ConfigNumberField(
        name="at_risk_threshold", help_text="At risk: a chance of finishing after the due time of at least this."
    )
    due_first = StrictBooleanField(
        required=False, help_text="Inside each org's share, its charts by due time (the rounds unchanged)."
    )
    rescue_max_budget = StrictIntegerField(
        required=False,
        allow_null=True,
        **RESCUE_MAX_BUDGET.limits,
        help_text="The largest budget a rescue may propose; null: the budget, unchanged.",
    )
    rescue_max_weight = StrictIntegerField(
        required=False, **RESCUE_MAX_WEIGHT.limits, help_text="The largest org weight a rescue may propose."
    )
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
            scheduler_config_set(actor=actor_of(request), **body.validated_data)
        config = SchedulerConfig.load()  # as stored, for the ETag a GET will answer
        return with_etag(Response(SchedulerConfigSerializer(config).data), config)
