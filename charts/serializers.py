"""How charts look in the API, and the shapes of the requests that change them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from charts.levers import PRIORITY
from charts.models import Chart, ChartState, WaitingReason
from charts.promise import AT_RISK, LATE, chart_promise
from charts.running import chart_overdue
from charts.selectors import SubmitWarning, last_error_summary
from charts.services import MAX_BULK_ITEMS, MAX_EXTERNAL_ID, ChartRequest
from charts.waiting import chart_waiting
from common.errors import InvalidInput
from common.outputs import OutputFieldsOnce
from common.strict import (
    CommaChoiceField,
    QueryBooleanField,
    ReasonField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictQuerySerializer,
    StrictSerializer,
    StrictSlugField,
)


class ChartSerializer(OutputFieldsOnce, serializers.ModelSerializer[Chart]):
    """A chart with its place in the plan: position, predicted start, ETA and its p10-p90 band. Its output
    fields are built once per class (`common.outputs`): the status read is the API's most frequent call."""

    org = serializers.CharField(source="org.slug", read_only=True)
    workflow = serializers.CharField(source="workflow.name", read_only=True)
    last_error = serializers.SerializerMethodField(help_text="First line of the last error, shortened.")
    # The plan (kept in ChartPlan, joined in by the chart manager).
    position = serializers.IntegerField(read_only=True, allow_null=True, help_text="0-based place in the fair order.")
    predicted_start = serializers.DateTimeField(read_only=True, allow_null=True)
    eta = serializers.DateTimeField(read_only=True, allow_null=True, help_text="Predicted finish.")
    eta_low = serializers.DateTimeField(read_only=True, allow_null=True, help_text="p10 of the predicted finish.")
    eta_high = serializers.DateTimeField(read_only=True, allow_null=True, help_text="p90 of the predicted finish.")
    # Why it waits (`charts.waiting.chart_waiting`; `charts.models.WaitingReason` defines both times).
    waiting_reason = serializers.SerializerMethodField(
        help_text="Why a waiting chart is not running now: budget, turn, org_cap, provider_paused, backoff,"
        " retry_budget, org_held, chart_paused or not_yet_planned; null when it is not waiting (or starts now)."
    )
    waiting_until = serializers.SerializerMethodField(
        help_text="When that reason lifts, as far as the last replan knows: the end of the backoff or of the"
        " provider's pause; for budget, turn, org_cap and retry_budget the predicted start; else null."
    )
    available_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="The end of the chart's own retry backoff; null without one."
    )
    # A run past what the plan expects of it (`charts.running`).
    expected_duration = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="For a chart in flight: how long the plan expects its run to take, in seconds (what its ETA"
        " was computed from); null for a chart that is not in flight or not yet planned.",
    )
    overdue = serializers.SerializerMethodField(
        help_text="True when the chart is running and has run longer than expected_duration (running longer"
        " than usual): its eta and band are then its median time left given how long it has run, never"
        " before the replan that made them. False otherwise."
    )
    # The turnaround promise (`charts.promise`).
    due_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the chart is promised finished; null: no promise."
    )
    late_chance = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="The last replan's chance (0 to 1) that the chart finishes after due_at, from the distribution"
        " its band comes from; null without a due time, without an ETA, or once it is no longer waiting or running.",
    )
    at_risk = serializers.SerializerMethodField(
        help_text="True when the chart waits or runs, is not past due, and late_chance is at least the scheduler's"
        " at-risk threshold (default 0.5). False otherwise, and without a due time."
    )
    late = serializers.SerializerMethodField(
        help_text="True when the chart is past due_at and not finished, or finished after due_at. False otherwise,"
        " and without a due time."
    )

    class Meta:
        model = Chart
        fields = [
            "id",
            "org",
            "workflow",
            "external_id",
            "state",
            "high_priority",
            "priority",
            "position",
            "predicted_start",
            "eta",
            "eta_low",
            "eta_high",
            "expected_duration",
            "overdue",
            "due_at",
            "late_chance",
            "at_risk",
            "late",
            "waiting_reason",
            "waiting_until",
            "available_at",
            "attempt",
            "last_error",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_last_error(self, chart: Chart) -> str:
        return last_error_summary(chart.last_error)

    @extend_schema_field(serializers.BooleanField())
    def get_overdue(self, chart: Chart) -> bool:
        return chart_overdue(chart, now=timezone.now())

    @extend_schema_field(serializers.BooleanField())
    def get_at_risk(self, chart: Chart) -> bool:
        return chart_promise(chart, now=timezone.now()) == AT_RISK

    @extend_schema_field(serializers.BooleanField())
    def get_late(self, chart: Chart) -> bool:
        return chart_promise(chart, now=timezone.now()) == LATE

    @extend_schema_field(serializers.ChoiceField(choices=WaitingReason.choices, allow_null=True))
    def get_waiting_reason(self, chart: Chart) -> str | None:
        waiting = chart_waiting(chart)
        return None if waiting is None else waiting.reason.value

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_waiting_until(self, chart: Chart) -> str | None:
        waiting = chart_waiting(chart)
        return (
            None
            if waiting is None or waiting.until is None
            else serializers.DateTimeField().to_representation(waiting.until)
        )


class ChartDetailSerializer(ChartSerializer):
    class Meta(ChartSerializer.Meta):
        fields = [*ChartSerializer.Meta.fields, "payload"]
        read_only_fields = fields


class SubmitWarningSerializer(serializers.Serializer[Any]):
    """Something the submission was accepted despite."""

    field = serializers.CharField(help_text="The field it is about: `due_at`.")
    message = serializers.CharField()


class ChartLeverSerializer(ChartDetailSerializer):
    """A chart as a submission or a lever left it. The plan fields are still those of the plan before
    the change: a replan is under way (`replanning`), and its result reaches the chart's page, its
    WebSocket group and the next read within seconds."""

    replanning = serializers.SerializerMethodField(
        help_text="True when this change moves the plan: position, predicted_start and eta are from the"
        " plan before it, and a replan is under way (refetch the chart for the new place)."
    )
    warnings = serializers.SerializerMethodField(
        help_text="What a submission was accepted despite: a due_at sooner than the workflow's expected"
        " duration, or a repeat whose first due time stands. Empty: nothing."
    )

    class Meta(ChartDetailSerializer.Meta):
        fields = [*ChartDetailSerializer.Meta.fields, "replanning", "warnings"]
        read_only_fields = fields

    def get_replanning(self, chart: Chart) -> bool:
        return bool(self.context.get("replanning", True))

    @extend_schema_field(SubmitWarningSerializer(many=True))
    def get_warnings(self, chart: Chart) -> list[dict[str, str]]:
        warnings: list[SubmitWarning] = self.context.get("warnings", [])
        return [{"field": warning.field, "message": warning.message} for warning in warnings]


class ChartEventSerializer(serializers.Serializer[Any]):
    """One transition in a chart's history."""

    # Built from `charts.selectors.EventView`.

    at = serializers.DateTimeField(help_text="When it happened.")
    from_state = serializers.CharField(help_text="The state before; empty for the submission.")
    to_state = serializers.CharField(help_text="The state after.")
    reason = serializers.CharField(help_text="Why, in one line (staff see it whole).")
    actor = serializers.CharField(
        help_text=(
            "Who: `system:dispatcher`, `system:reconciler`, ...; `user:<name>` for a member of the chart's org; "
            "`staff` for anyone else (staff callers see every name)."
        )
    )


class ChartFilterSerializer(StrictQuerySerializer):
    """The charts list's filters, each at most once (with `cursor` and `page_size`, nothing else)."""

    state = CommaChoiceField(
        choices=ChartState.values,
        required=False,
        help_text=f"One or more states, separated by commas (`state=queued,running`): {', '.join(ChartState.values)}.",
    )
    workflow = serializers.CharField(required=False, max_length=200)
    external_id = serializers.CharField(required=False, max_length=MAX_EXTERNAL_ID)
    org = serializers.SlugField(
        required=False, max_length=100, help_text="An org's slug (staff, or a member of several)."
    )
    created_after = serializers.DateTimeField(
        required=False, help_text="Submitted after this time (ISO 8601, e.g. 2026-01-31T12:00:00Z)."
    )
    created_before = serializers.DateTimeField(required=False, help_text="Submitted before this time (ISO 8601).")
    updated_after = serializers.DateTimeField(
        required=False, help_text="Changed (a transition or a lever) after this time (ISO 8601)."
    )
    at_risk = QueryBooleanField(
        required=False, help_text="`true`: only the charts at risk of missing their due time; `false`: the others."
    )
    late = QueryBooleanField(
        required=False, help_text="`true`: only the charts past due (or finished after it); `false`: the others."
    )


class BulkItemSerializer(StrictSerializer):
    """One chart to submit: an item of a bulk submission, or with its org a single submission."""

    # The schema of a bulk's items; `parse_bulk_items` reads them on a faster path.

    workflow = StrictCharField(max_length=200, visible=True)
    external_id = StrictCharField(
        max_length=MAX_EXTERNAL_ID, visible=True, trim_whitespace=False, help_text="Your id; unique within the org."
    )
    payload = serializers.DictField(required=False, allow_null=True, help_text="Passed to the workflow (JSON object).")
    high_priority = StrictBooleanField(
        required=False,
        default=False,
        help_text="Staff only: the operators' tier, ahead of every org's share. A tenant gets 403.",
    )
    priority = StrictIntegerField(
        required=False,
        default=0,
        **PRIORITY.limits,
        help_text="Orders the org's own charts (higher first) inside its share of each round; it never"
        " changes how many charts per round the org gets. Tenants: -10 to 10 (beyond: 403); staff: -1000"
        " to 1000.",
    )
    due_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="When the chart is due (ISO 8601 with its time zone), after now; absent or null: its"
        " submission plus the org's turnaround for the workflow (none without one). Sooner than the"
        " workflow's expected duration is accepted with a warning. A repeat keeps its first due time.",
    )


class ChartSubmitSerializer(BulkItemSerializer):
    org = StrictSlugField(
        required=False, max_length=100, help_text="The org's slug; implied for org tokens and members of one org."
    )


class BulkSubmitSerializer(StrictSerializer):
    org = StrictSlugField(required=False, max_length=100)
    items = serializers.ListField(
        child=BulkItemSerializer(), min_length=1, max_length=MAX_BULK_ITEMS, help_text=f"1 to {MAX_BULK_ITEMS} charts."
    )


class BulkResultItemSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    external_id = serializers.CharField()
    created = serializers.BooleanField(help_text="False when the chart existed already (idempotent repeat).")
    due_at = serializers.DateTimeField(allow_null=True, help_text="When it is due; null: no due time.")
    warnings = SubmitWarningSerializer(many=True, help_text="What this item was accepted despite; empty: nothing.")


class BulkResultSerializer(serializers.Serializer[Any]):
    created = serializers.IntegerField()
    existing = serializers.IntegerField()
    charts = BulkResultItemSerializer(many=True)


class PrioritizeSerializer(StrictSerializer):
    high_priority = StrictBooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Staff only: put the chart in (true) or take it out of (false) the operators' tier.",
    )
    priority = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        **PRIORITY.limits,
        help_text="Orders the org's own charts inside its share. Tenants: -10 to 10; staff: -1000 to 1000.",
    )
    reason = ReasonField()


ITEM_KEYS = frozenset(BulkItemSerializer().fields)


def parse_bulk_items(items: object) -> list[ChartRequest]:
    """Read bulk items without a serializer per item (10,000 of them must parse in milliseconds).

    Only the list and each item's shape are read here: what is wrong with an item's shape (not an
    object, an unknown key, no string `workflow` or `external_id`) goes into its `problems`, and
    `chart_submit_bulk` reports it with what is wrong with its values, every item by index."""
    if not isinstance(items, list):
        raise InvalidInput("items must be a list of charts", field="items")
    if not items:
        raise InvalidInput("items must not be empty", field="items")
    if len(items) > MAX_BULK_ITEMS:
        raise InvalidInput(f"at most {MAX_BULK_ITEMS} charts per request, got {len(items)}", field="items")
    parsed: list[ChartRequest] = []
    for item in items:
        if not isinstance(item, dict):
            parsed.append(ChartRequest("", "", problems={"detail": ["each item must be a JSON object"]}))
            continue
        problems: dict[str, list[str]] = {str(key): ["unknown field"] for key in item.keys() - ITEM_KEYS}
        for key in ("workflow", "external_id"):
            if not isinstance(item.get(key), str):
                problems[key] = ["this field is required and must be a string"]
        due_at, problem = due_at_read(item.get("due_at"))
        if problem is not None:
            problems["due_at"] = [problem]
        parsed.append(
            ChartRequest(
                workflow=item.get("workflow", ""),
                external_id=item.get("external_id", ""),
                payload=item.get("payload"),
                high_priority=item.get("high_priority", False),
                priority=item.get("priority", 0),
                due_at=due_at,
                problems=problems,
            )
        )
    return parsed


def due_at_read(value: object) -> tuple[datetime | None, str | None]:
    """A due time as an interface receives it (ISO 8601 text, or null/absent), and what is wrong
    with its text; whether it has a zone and lies ahead, `chart_submit_bulk` judges."""
    if value is None or value == "":
        return None, None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) and len(value) <= 64 else None
    except ValueError:  # well formed, but no such moment (a 13th month)
        parsed = None
    if parsed is None:
        return None, f"due_at must be a date and time in ISO 8601 with its time zone, got {str(value)[:64]!r}"
    if parsed.tzinfo is None:
        return None, "due_at must carry a time zone (e.g. 2026-01-31T12:00:00Z or +02:00)"
    return parsed, None


class StateCountsSerializer(serializers.Serializer[Any]):
    """The org's charts per state."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {state: serializers.IntegerField() for state in ChartState.values}


class OrgDetailSerializer(serializers.Serializer[Any]):
    """An org with its charts counted per state and its predicted clear-time."""

    slug = serializers.CharField(source="org.slug")
    name = serializers.CharField(source="org.name")
    weight = serializers.IntegerField(source="org.weight")
    held = serializers.BooleanField(source="org.is_held")
    hold_reason = serializers.CharField(
        source="org.hold_reason",
        help_text="Why the org is held, written for its members (empty: not held, or no reason given).",
    )
    max_concurrency = serializers.IntegerField(source="org.max_concurrency", allow_null=True)
    queue_limit = serializers.IntegerField(source="org.queue_limit", allow_null=True)
    turnaround = serializers.IntegerField(
        source="org.turnaround", allow_null=True, help_text="Seconds in which its charts are promised; null: none."
    )
    turnaround_share = serializers.FloatField(
        source="org.turnaround_share", allow_null=True, help_text="Share promised within it; null: not said."
    )
    clear_at = serializers.DateTimeField(allow_null=True, help_text="When its backlog is predicted to be done.")
    clear_low = serializers.DateTimeField(source="org.clear_low", allow_null=True, help_text="p10 of clear_at.")
    clear_high = serializers.DateTimeField(source="org.clear_high", allow_null=True, help_text="p90 of clear_at.")
    counts = StateCountsSerializer()
