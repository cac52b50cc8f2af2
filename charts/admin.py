"""Charts in the admin: filters, search, the read-only event history, and actions through the services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from charts import services
from charts.models import WAITING_STATES, Chart, ChartEvent, ChartState, DurationStat
from common.actors import Actor
from common.admin_utils import ReasonActionForm, ServiceModelAdmin, action_reason, apply_each
from orgs.admin import OrgAdmin
from orgs.models import Org


class ChartEventInline(admin.TabularInline[ChartEvent, Chart]):
    model = ChartEvent
    extra = 0
    can_delete = False
    fields = readonly_fields = ("at", "from_state", "to_state", "actor", "reason")
    verbose_name_plural = "event history"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def planned(chart: Chart, value: Any) -> Any:
    """A plan's figure of the chart; a waiting chart the plan has not placed yet is "not planned" (one
    that no longer waits has none: the admin's empty value)."""
    if value is None and chart.state in WAITING_STATES:
        return "not planned"
    return value


class ChartForm(ModelForm[Chart]):
    class Meta:
        model = Chart
        fields = ["org", "workflow", "external_id", "payload", "high_priority", "priority", "due_at"]


@admin.register(Chart)
class ChartAdmin(ServiceModelAdmin[Chart]):
    list_display = [
        "id", "external_id", "org", "workflow", "state", "high_priority", "priority",
        "position", "predicted_start", "eta", "attempt",
    ]  # fmt: skip
    list_filter = ["state", "org", "workflow", "high_priority"]
    search_fields = ["external_id"]
    list_select_related = ["org", "workflow"]
    show_full_result_count = False
    inlines = [ChartEventInline]
    actions = ["pause", "resume", "make_high_priority", "move_to_top", "cancel"]
    action_form = ReasonActionForm
    readonly_fields = [
        "state", "attempt", "runs", "available_at", "cost", "last_error", "temporal_workflow_id", "temporal_run_id",
        "claimed_at", "started_at", "finished_at", "cancel_requested_at", "position", "predicted_start", "eta",
        "eta_low", "eta_high", "created_at", "updated_at",
    ]  # fmt: skip

    def get_ordering(self, request: HttpRequest) -> list[str]:
        # The fair order first (position is the plan's, joined in by the chart manager).
        return ["position", "created_at", "id"]

    @admin.display(ordering="position")
    def position(self, chart: Any) -> int | str | None:
        return planned(chart, chart.position)

    @admin.display(ordering="predicted_start")
    def predicted_start(self, chart: Any) -> Any:
        return planned(chart, chart.predicted_start)

    @admin.display(ordering="eta", description="ETA")
    def eta(self, chart: Any) -> Any:
        return planned(chart, chart.eta)

    @admin.display(description="ETA p10")
    def eta_low(self, chart: Any) -> Any:
        return planned(chart, chart.eta_low)

    @admin.display(description="ETA p90")
    def eta_high(self, chart: Any) -> Any:
        return planned(chart, chart.eta_high)

    def get_form(self, request: HttpRequest, obj: Chart | None = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = ChartForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Chart | None = None) -> Any:
        if obj is None:
            return ChartForm.Meta.fields
        return [*ChartForm.Meta.fields, *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Chart | None = None) -> Any:
        if obj is None:
            return []
        return [*ChartForm.Meta.fields, *self.readonly_fields]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Chart, form: ModelForm[Chart], change: bool) -> None:
        if change:  # every field of a saved chart is read-only: its levers are the actions
            return
        chart, _ = services.chart_submit(
            org=obj.org,
            workflow=obj.workflow.name,
            external_id=obj.external_id,
            payload=obj.payload,
            high_priority=obj.high_priority,
            priority=obj.priority,
            due_at=obj.due_at,
            actor=Actor.operator(request.user),
        )
        obj.pk = chart.pk

    @admin.action(description="Pause the selected charts")
    def pause(self, request: HttpRequest, queryset: QuerySet[Chart]) -> None:
        self._each(request, queryset, lambda c, **who: services.chart_pause(chart=c, **who), "Paused")

    @admin.action(description="Resume the selected charts")
    def resume(self, request: HttpRequest, queryset: QuerySet[Chart]) -> None:
        self._each(request, queryset, lambda c, **who: services.chart_resume(chart=c, **who), "Resumed")

    @admin.action(description="Give the selected charts high priority")
    def make_high_priority(self, request: HttpRequest, queryset: QuerySet[Chart]) -> None:
        self._each(
            request,
            queryset,
            lambda c, **who: services.chart_prioritize(chart=c, high_priority=True, **who),
            "Prioritized",
        )

    @admin.action(description="Move the selected charts to the top of their org's queue")
    def move_to_top(self, request: HttpRequest, queryset: QuerySet[Chart]) -> None:
        self._each(request, queryset, lambda c, **who: services.chart_move_to_top(chart=c, **who), "Moved")

    @admin.action(description="Cancel the selected charts")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Chart]) -> None:
        self._each(request, queryset, lambda c, **who: services.chart_cancel(chart=c, **who), "Cancelled")

    def _each(self, request: HttpRequest, queryset: QuerySet[Chart], lever: Callable[..., object], verb: str) -> None:
        """Pull `lever` on every selected chart, as the user who acts and with the action bar's reason."""
        reason = action_reason(self, request)
        if reason is None:
            return
        actor = Actor.operator(request.user)
        apply_each(self, request, queryset, lambda c: lever(c, actor=actor, reason=reason), verb)


# The orgs' page with each org's queued and running charts: orgs.admin registers it without them (that
# app sits below this one and does not know charts); importing it above guarantees it is registered first.
admin.site.unregister(Org)


@admin.register(Org)
class OrgWithChartsAdmin(OrgAdmin):
    list_display = ["name", "slug", "weight", "held", "max_concurrency", "queue_limit", "queued", "running", "clear_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Org]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                queued_count=Count("charts", filter=Q(charts__state=ChartState.QUEUED)),
                running_count=Count("charts", filter=Q(charts__state=ChartState.RUNNING)),
            )
        )

    @admin.display(ordering="queued_count")
    def queued(self, org: Any) -> int:
        return int(org.queued_count)

    @admin.display(ordering="running_count")
    def running(self, org: Any) -> int:
        return int(org.running_count)


@admin.register(DurationStat)
class DurationStatAdmin(admin.ModelAdmin[DurationStat]):
    """What the ETAs learned of each (org, workflow)'s run durations (`scheduling.reconcile.
    duration_record`), read-only; deleting one forgets it through the service, logged in the org's
    history (after a new version of a workflow that takes another time, say)."""

    list_display = ["org", "workflow", "mean_seconds", "spread", "count", "updated_at"]
    list_filter = ["workflow", "org"]
    search_fields = ["org__slug", "workflow__name"]
    list_select_related = ["org", "workflow"]
    ordering = ["org__slug", "workflow__name"]
    fields = readonly_fields = ("org", "workflow", "mean_seconds", "spread", "count", "updated_at")

    @admin.display(description="mean (s)")
    def mean_seconds(self, stat: DurationStat) -> str:
        return "-" if stat.mean is None else f"{stat.mean:.1f}"

    @admin.display(description="spread (log sigma)")
    def spread(self, stat: DurationStat) -> str:
        return "-" if stat.log_sigma is None else f"{stat.log_sigma:.2f}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: DurationStat) -> None:
        services.duration_stats_forget(stats=[obj], actor=Actor.operator(request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[DurationStat]) -> None:
        services.duration_stats_forget(stats=list(queryset), actor=Actor.operator(request.user))
