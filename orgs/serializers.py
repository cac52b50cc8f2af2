"""How orgs look in the API, and the staff's requests that change them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from common.api import etag
from common.strict import (
    ReasonField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictQuerySerializer,
    StrictSerializer,
    StrictSlugField,
)
from orgs.levers import COST, MAX_CONCURRENCY, QUEUE_LIMIT, TURNAROUND, TURNAROUND_SHARE, WEIGHT
from orgs.models import (
    ApiToken,
    Membership,
    Org,
    OrgChange,
    Provider,
    ProviderPause,
    Workflow,
    WorkflowCost,
    WorkflowTurnaround,
)
from orgs.services import RUN_TIMEOUT, WORKFLOW_FIELDS, zone_names


class OrgSerializer(serializers.ModelSerializer[Org]):
    held = serializers.BooleanField(source="is_held", read_only=True, help_text="Weight 0: nothing dispatches.")
    hold_reason = serializers.CharField(
        read_only=True, help_text="Why the org is held, written for its members (empty: not held, or no reason)."
    )

    class Meta:
        model = Org
        fields = [
            "slug",
            "name",
            "weight",
            "held",
            "hold_reason",
            "max_concurrency",
            "queue_limit",
            "turnaround",
            "turnaround_share",
            "clear_at",
            "clear_low",
            "clear_high",
        ]
        read_only_fields = fields


class ShareField(StrictFloatField):
    """A share promised within a turnaround: a number above 0 and at most 1 (its schema says so; the
    service checks it, `orgs.levers.TURNAROUND_SHARE`)."""

    def __init__(self, **kwargs: Any) -> None:
        self._spectacular_annotation = {"field": TURNAROUND_SHARE.schema}
        super().__init__(required=False, allow_null=True, **kwargs)


TURNAROUND_HELP = "Seconds from submission in which a chart is promised, 1 s to 366 days; null: no promise."


class OrgUpdateSerializer(StrictSerializer):
    weight = StrictIntegerField(required=False, **WEIGHT.limits)
    max_concurrency = StrictIntegerField(required=False, allow_null=True, **MAX_CONCURRENCY.limits)
    queue_limit = StrictIntegerField(required=False, allow_null=True, **QUEUE_LIMIT.limits)
    turnaround = StrictIntegerField(required=False, allow_null=True, **TURNAROUND.limits, help_text=TURNAROUND_HELP)
    turnaround_share = ShareField(help_text="Share of charts promised within the turnaround, in (0, 1]; null: none.")
    reason = ReasonField()


class WorkflowCostSerializer(serializers.ModelSerializer[WorkflowCost]):
    workflow = serializers.CharField(source="workflow.name", read_only=True)

    class Meta:
        model = WorkflowCost
        fields = ["workflow", "cost"]
        read_only_fields = fields


class WorkflowCostListedSerializer(WorkflowCostSerializer):
    """An override in the org's list of costs, with the ETag its own GET answers: edit it with If-Match
    straight from the list."""

    etag = serializers.SerializerMethodField(
        help_text="The override's ETag, as GET /api/v1/orgs/{slug}/costs/{workflow}/ answers it in its header:"
        " send it as If-Match to PUT or DELETE this version only."
    )

    class Meta(WorkflowCostSerializer.Meta):
        fields = [*WorkflowCostSerializer.Meta.fields, "etag"]
        read_only_fields = fields

    def get_etag(self, cost: WorkflowCost) -> str:
        return etag(cost)


class WorkflowCostSetSerializer(StrictSerializer):
    cost = StrictIntegerField(**COST.limits)
    reason = ReasonField()


class WorkflowTurnaroundSerializer(serializers.ModelSerializer[WorkflowTurnaround]):
    workflow = serializers.CharField(source="workflow.name", read_only=True)
    turnaround = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="Seconds; null: no override, the org's turnaround applies."
    )
    share = serializers.FloatField(read_only=True, allow_null=True, help_text="null: the org's share.")

    class Meta:
        model = WorkflowTurnaround
        fields = ["workflow", "turnaround", "share"]
        read_only_fields = fields


class WorkflowTurnaroundListedSerializer(WorkflowTurnaroundSerializer):
    """An override in the org's list of turnarounds, with the ETag its own GET answers."""

    etag = serializers.SerializerMethodField(
        help_text="The override's ETag, as GET /api/v1/orgs/{slug}/turnarounds/{workflow}/ answers it: send it"
        " as If-Match to PUT, PATCH or DELETE this version only."
    )

    class Meta(WorkflowTurnaroundSerializer.Meta):
        fields = [*WorkflowTurnaroundSerializer.Meta.fields, "etag"]
        read_only_fields = fields

    def get_etag(self, row: WorkflowTurnaround) -> str:
        return etag(row)


class WorkflowTurnaroundSetSerializer(StrictSerializer):
    turnaround = StrictIntegerField(**TURNAROUND.limits, help_text="Seconds from submission, 1 s to 366 days.")
    share = ShareField(help_text="Share of charts promised within it, in (0, 1]; null or absent: the org's.")
    reason = ReasonField()


class WorkflowTurnaroundPatchSerializer(WorkflowTurnaroundSetSerializer):
    """Either field of an override (at least one); the other keeps its value."""

    turnaround = StrictIntegerField(required=False, **TURNAROUND.limits, help_text="Seconds, 1 s to 366 days.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "turnaround" not in attrs and "share" not in attrs:
            raise serializers.ValidationError("give turnaround, share or both")
        return attrs


class OrgChangeSerializer(serializers.ModelSerializer[OrgChange]):
    """One line of an org's change history: who pulled which lever, from what to what, and why."""

    class Meta:
        model = OrgChange
        fields = ["id", "at", "actor", "field", "old_value", "new_value", "reason"]
        read_only_fields = fields


class WorkflowTermsSerializer(serializers.Serializer[Any]):
    """A workflow with what it means for the caller's org."""

    # Built from `scheduling.selectors.WorkflowTerms`.

    name = serializers.CharField(source="workflow.name")
    default_cost = serializers.IntegerField(source="workflow.default_cost")
    provider = serializers.CharField(
        source="workflow.provider.slug", allow_null=True, help_text="The provider its runs call; null: none."
    )
    run_timeout = serializers.IntegerField(
        source="workflow.run_timeout",
        allow_null=True,
        help_text="Seconds a run may take; null: the deployment's default.",
    )
    effective_run_timeout = serializers.IntegerField(
        source="workflow.effective_run_timeout",
        help_text="Seconds a run started now may take before Temporal times it out.",
    )
    initial_duration = serializers.IntegerField(
        source="workflow.initial_duration",
        allow_null=True,
        help_text="Seconds a run is expected to take until runs of it have been learned; null: the default.",
    )
    org = serializers.CharField(
        source="org.slug", allow_null=True, help_text="The org that `cost` and `expected_duration` are for; null: none."
    )
    cost = serializers.IntegerField(
        help_text="Budget units one run occupies for that org (its override, else the default)."
    )
    expected_duration = serializers.FloatField(
        help_text=(
            "Seconds a run is expected to take: the org's runs of it, else the workflow's runs by "
            "every org, else its `initial_duration`, else the org's runs, else the default."
        )
    )


class WorkflowTermsQuerySerializer(StrictQuerySerializer):
    org = serializers.SlugField(
        required=False,
        max_length=100,
        help_text="The org whose cost and expected duration to show; default: the caller's only org.",
    )


class ProviderPauseInForceSerializer(serializers.Serializer[Any]):
    org = serializers.CharField(source="org.slug", allow_null=True, help_text="The paused org; null: everyone.")
    until = serializers.DateTimeField()
    reason = serializers.CharField()


class ProviderResumeSerializer(StrictSerializer):
    org = StrictSlugField(
        max_length=100, required=False, allow_null=True, default=None, help_text="null: the pause for everyone"
    )
    reason = ReasonField()


class ProviderResumeResultSerializer(serializers.Serializer[Any]):
    ended = serializers.IntegerField(help_text="How many pauses in force were ended (0: none was).")


class ProviderSerializer(serializers.Serializer[Any]):
    """A provider with the pauses in force that apply to the caller (every pause for staff)."""

    slug = serializers.SlugField()
    name = serializers.CharField()
    paused_until = serializers.SerializerMethodField(
        help_text="When the last pause that applies ends; null: not paused."
    )
    pauses = ProviderPauseInForceSerializer(source="pauses_in_force", many=True)

    def get_paused_until(self, provider: Provider) -> datetime | None:
        pauses: list[ProviderPause] = getattr(provider, "pauses_in_force", [])
        return max((pause.until for pause in pauses), default=None)


class WorkflowSerializer(serializers.ModelSerializer[Workflow]):
    """A workflow as staff configure it."""

    provider = serializers.CharField(
        source="provider.slug", allow_null=True, read_only=True, help_text="The provider its runs call; null: none."
    )

    class Meta:
        model = Workflow
        fields = [
            "name",
            "workflow_type",
            "task_queue",
            "default_cost",
            "run_timeout",
            "effective_run_timeout",
            "initial_duration",
            "provider",
            "params",
        ]
        read_only_fields = fields


class WorkflowCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=200, visible=True)
    workflow_type = StrictCharField(max_length=200, visible=True, help_text="The Temporal workflow type it starts.")
    task_queue = StrictCharField(max_length=200, visible=True)
    default_cost = StrictIntegerField(required=False, default=1, **COST.limits)
    run_timeout = StrictIntegerField(
        required=False,
        default=None,
        allow_null=True,
        **RUN_TIMEOUT.limits,
        help_text="Seconds; null: the deployment's default.",
    )
    initial_duration = StrictIntegerField(
        required=False,
        default=None,
        allow_null=True,
        **RUN_TIMEOUT.limits,
        help_text="Seconds a run is expected to take until runs of it have been learned; null: the deployment's"
        " default (FAIRSCHED_DEFAULT_DURATION).",
    )
    provider = StrictSlugField(
        required=False, default=None, allow_null=True, max_length=100, help_text="A provider's slug; null: none."
    )
    params = serializers.DictField(required=False, default=dict, help_text="Passed to every run of this workflow.")


class WorkflowUpdateSerializer(WorkflowCreateSerializer):
    """Any subset of a workflow's fields (at least one)."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        for field in fields.values():
            field.required = False
            field.default = serializers.empty
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError(f"give at least one of: {', '.join(WORKFLOW_FIELDS)}")
        return attrs


class OrgCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=200, visible=True)
    slug = StrictSlugField(max_length=100, required=False, help_text="Default: made from the name.")
    weight = StrictIntegerField(required=False, default=1, **WEIGHT.limits)
    max_concurrency = StrictIntegerField(required=False, default=None, allow_null=True, **MAX_CONCURRENCY.limits)
    queue_limit = StrictIntegerField(required=False, default=None, allow_null=True, **QUEUE_LIMIT.limits)


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    user = serializers.CharField(source="user.username", read_only=True)
    org = serializers.CharField(source="org.slug", read_only=True)

    class Meta:
        model = Membership
        fields = ["user", "org", "role", "created_at"]
        read_only_fields = fields


class MembershipCreateSerializer(StrictSerializer):
    user = StrictCharField(max_length=150, visible=True, help_text="An existing user's username.")
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MembershipRoleSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class ApiTokenSerializer(serializers.ModelSerializer[ApiToken]):
    user = serializers.CharField(source="user.username", read_only=True)
    org = serializers.CharField(source="org.slug", allow_null=True, read_only=True, help_text="null: a staff token.")
    staff = serializers.BooleanField(source="is_staff", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "prefix", "user", "org", "staff", "name", "created_at", "last_used_at"]
        read_only_fields = fields


class ApiTokenIssuedSerializer(ApiTokenSerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown this once; only a digest is stored.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class ApiTokenIssueSerializer(StrictSerializer):
    user = StrictCharField(max_length=150, visible=True, help_text="An existing user's username.")
    org = StrictSlugField(
        max_length=100, required=False, default=None, allow_null=True, help_text="Scope to this org (a member's)."
    )
    staff = StrictBooleanField(required=False, default=False, help_text="Scope to staff (the user must be staff).")
    name = StrictCharField(max_length=200, required=False, allow_blank=True, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if (attrs["org"] is None) == (not attrs["staff"]):
            raise serializers.ValidationError({"org": ["give org or staff: true, not both and not neither"]})
        return attrs


class HoldSerializer(StrictSerializer):
    reason = ReasonField(
        help_text="Why, written for the customer: the org's members see it (portal, `hold_reason`) until the"
        " release. At most 500 characters, one line."
    )


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


class ViewerZoneSerializer(StrictSerializer):
    """The zone the caller reads times in: an IANA zone name, or null for the browser's own."""

    zone = serializers.ChoiceField(
        choices=zone_names(),
        allow_null=True,
        allow_blank=True,
        error_messages={"invalid_choice": "zone must be an IANA time zone name such as Europe/Berlin, got {input}"},
    )
