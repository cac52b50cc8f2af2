"""Staff endpoints on the scheduler: the plan preview and the rescue (its configuration: `knobs.api`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from charts.levers import PRIORITY
from common.api import FairschedAPIView
from common.strict import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
    StrictSlugField,
)
from knobs.levers import AGING_CAP, BUDGET
from knobs.models import SchedulerConfig
from orgs.access import IsStaffScope, actor_of
from orgs.levers import COST, MAX_CONCURRENCY, QUEUE_LIMIT, WEIGHT
from orgs.models import Org, Provider, Workflow
from scheduling.rescue import rescue_apply, rescue_find
from scheduling.what_if import plan_preview

STAFF = [IsAuthenticated, IsStaffScope]


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


class SearchedFromSerializer(StrictSerializer):
    budget = StrictIntegerField(required=False, **BUDGET.limits)
    weights = serializers.DictField(child=StrictIntegerField(**WEIGHT.limits), required=False)


class RescueRequestSerializer(StrictSerializer):
    """Which org to rescue (omitted or null: every org), whether to apply the change found, and why."""

    org = StrictSlugField(max_length=100, required=False, allow_null=True, help_text="null: every org's at-risk count")
    apply = StrictBooleanField(required=False, default=False, help_text="Pull the levers found (with `reason`).")
    reason = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
    searched_from = SearchedFromSerializer(
        required=False, help_text="A preview's `searched_from`: applied only if those levers are still so (else 409)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        org = attrs.get("org")
        if org is not None and not Org.objects.filter(slug=org).exists():
            raise serializers.ValidationError({"org": [f"unknown org: {org}"]})
        if attrs.get("apply") and not attrs.get("reason", "").strip():
            raise serializers.ValidationError({"reason": ["say why the rescue is applied"]})
        return attrs


class RescueSideSerializer(serializers.Serializer[Any]):
    at_risk = serializers.IntegerField()
    late = serializers.IntegerField(help_text="Past due now (a change of levers cannot undo it).")
    clear = serializers.DateTimeField(allow_null=True)


class RescueOrgSerializer(serializers.Serializer[Any]):
    before = RescueSideSerializer()
    after = RescueSideSerializer()


RescueSerializer = inline_serializer(
    "Rescue",
    {
        "org": serializers.CharField(allow_null=True),
        "change": serializers.DictField(help_text="The change, as the what-if's change list (plan-preview's body)."),
        "levers": serializers.IntegerField(),
        "at_risk_before": serializers.IntegerField(),
        "at_risk_after": serializers.IntegerField(),
        "orgs": serializers.DictField(child=RescueOrgSerializer()),
        "plans": serializers.IntegerField(help_text="What-ifs the search planned."),
        "max_plans": serializers.IntegerField(),
        "exhausted": serializers.BooleanField(help_text="The search stopped at max_plans: the best change so far."),
        "searched_from": serializers.DictField(),
        "applied": serializers.BooleanField(),
    },
)


class RescueView(FairschedAPIView, APIView):
    permission_classes = STAFF

    @extend_schema(request=RescueRequestSerializer, responses=RescueSerializer)
    def post(self, request: Request) -> Response:
        """The smallest change of org weights, the budget and the high tier that brings the at-risk
        count of an org (or of all) to zero, or to its least (`scheduling.rescue`), with before and after
        per org; with `apply`, its levers pulled through their services with `reason` (409 naming a
        lever changed since the search, or since the preview's `searched_from`)."""
        body = RescueRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        found = rescue_find(org=data.get("org"))
        if data["apply"]:
            actor = actor_of(request)
            rescue_apply(rescue=found, actor=actor, reason=data["reason"], searched_from=data.get("searched_from"))
        return Response(found.answer(applied=bool(data["apply"])))
