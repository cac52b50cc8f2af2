"""The account managers' admin: tenants, their costs, caps, queue limits, holds and history.

Every change goes through `orgs.services`, so it is validated, logged in the org's history with the
user who made it, and followed by a replan.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest
from django.utils import timezone

from charts.models import ChartState
from fairsched.actors import actor_for
from fairsched.admin_utils import apply_each
from fairsched.errors import ServiceError
from fairsched.events import changed
from orgs import services
from orgs.models import Membership, Org, OrgChange, Provider, ProviderPause, Workflow, WorkflowCost


class WorkflowCostInline(admin.TabularInline[WorkflowCost, Org]):
    model = WorkflowCost
    extra = 0
    autocomplete_fields = ["workflow"]


class MembershipInline(admin.TabularInline[Membership, Org]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class OrgChangeInline(admin.TabularInline[OrgChange, Org]):
    model = OrgChange
    extra = 0
    can_delete = False
    fields = ["at", "actor", "field", "old_value", "new_value", "reason"]
    readonly_fields = fields
    ordering = ["-at", "-id"]
    verbose_name_plural = "change history"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Org)
class OrgAdmin(admin.ModelAdmin[Org]):
    list_display = ["name", "slug", "weight", "held", "max_concurrency", "queue_limit", "queued", "running", "clear_at"]
    list_editable = ["weight"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["clear_at", "created_at", "updated_at"]
    fields = ["name", "slug", "weight", "max_concurrency", "queue_limit", "clear_at", "created_at", "updated_at"]
    inlines = [WorkflowCostInline, MembershipInline, OrgChangeInline]
    actions = ["hold", "release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Org]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                queued_count=Count("charts", filter=Q(charts__state=ChartState.QUEUED)),
                running_count=Count("charts", filter=Q(charts__state=ChartState.RUNNING)),
            )
        )

    @admin.display(boolean=True)
    def held(self, org: Org) -> bool:
        return org.is_held

    @admin.display(ordering="queued_count")
    def queued(self, org: Any) -> int:
        return int(org.queued_count)

    @admin.display(ordering="running_count")
    def running(self, org: Any) -> int:
        return int(org.running_count)

    def save_model(self, request: HttpRequest, obj: Org, form: ModelForm[Org], change: bool) -> None:
        actor = actor_for(request.user)
        try:
            if not change:
                created = services.org_create(
                    name=obj.name,
                    slug=obj.slug,
                    weight=obj.weight,
                    max_concurrency=obj.max_concurrency,
                    queue_limit=obj.queue_limit,
                    actor=actor,
                )
                obj.pk = created.pk
                return
            setters = {
                "weight": lambda: services.org_weight_set(org=obj, weight=obj.weight, actor=actor),
                "max_concurrency": lambda: services.org_cap_set(
                    org=obj, max_concurrency=obj.max_concurrency, actor=actor
                ),
                "queue_limit": lambda: services.org_queue_limit_set(org=obj, queue_limit=obj.queue_limit, actor=actor),
            }
            for field in form.changed_data:
                if field in setters:
                    setters[field]()
            if {"name", "slug"} & set(form.changed_data):
                Org.objects.filter(pk=obj.pk).update(name=obj.name, slug=obj.slug)
        except ServiceError as error:
            self.message_user(request, f"{obj}: {error.message}", messages.ERROR)

    def save_formset(self, request: HttpRequest, form: Any, formset: BaseInlineFormSet[Any, Any, Any], change: bool) -> None:
        if formset.model is not WorkflowCost:
            super().save_formset(request, form, formset, change)
            return
        actor = actor_for(request.user)
        org = form.instance
        for inline_form in formset.forms:
            if not inline_form.has_changed() or "workflow" not in inline_form.cleaned_data:
                continue
            deleted = inline_form.cleaned_data.get("DELETE", False)
            cost = None if deleted else inline_form.cleaned_data["cost"]
            try:
                services.workflow_cost_set(org=org, workflow=inline_form.cleaned_data["workflow"], cost=cost, actor=actor)
            except ServiceError as error:
                self.message_user(request, f"{org}: {error.message}", messages.ERROR)

    @admin.action(description="Hold the selected orgs (nothing of theirs dispatches)")
    def hold(self, request: HttpRequest, queryset: QuerySet[Org]) -> None:
        actor = actor_for(request.user)
        apply_each(self, request, queryset, lambda org: services.org_hold(org=org, actor=actor), "Held")

    @admin.action(description="Release the selected orgs")
    def release(self, request: HttpRequest, queryset: QuerySet[Org]) -> None:
        actor = actor_for(request.user)
        apply_each(self, request, queryset, lambda org: services.org_release(org=org, actor=actor), "Released")


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin[Workflow]):
    list_display = ["name", "workflow_type", "task_queue", "default_cost", "provider"]
    list_filter = ["provider"]
    search_fields = ["name", "workflow_type"]

    def save_model(self, request: HttpRequest, obj: Workflow, form: ModelForm[Workflow], change: bool) -> None:
        super().save_model(request, obj, form, change)
        if "default_cost" in form.changed_data:
            changed(kind="workflow", workflow=obj.pk)


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin[Provider]):
    list_display = ["name", "slug"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


class ProviderPauseForm(ModelForm[ProviderPause]):
    class Meta:
        model = ProviderPause
        fields = ["provider", "org", "until", "reason"]

    def clean_until(self) -> Any:
        until = self.cleaned_data["until"]
        if until <= timezone.now():
            raise ValidationError("The pause must end in the future.")
        return until


@admin.register(ProviderPause)
class ProviderPauseAdmin(admin.ModelAdmin[ProviderPause]):
    """Pause a provider for everyone (org empty) or for one org until a time."""

    form = ProviderPauseForm
    list_display = ["provider", "org", "until", "reason", "created_by", "created_at"]
    list_filter = ["provider", "org"]
    fields = ["provider", "org", "until", "reason"]
    autocomplete_fields = ["provider", "org"]
    actions = ["end_now"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ProviderPause, form: ModelForm[ProviderPause], change: bool) -> None:
        try:
            pause = services.provider_pause(
                provider=obj.provider, org=obj.org, until=obj.until, reason=obj.reason, actor=actor_for(request.user)
            )
            obj.pk = pause.pk
        except ServiceError as error:
            self.message_user(request, error.message, messages.ERROR)

    @admin.action(description="End the selected pauses now")
    def end_now(self, request: HttpRequest, queryset: QuerySet[ProviderPause]) -> None:
        actor = actor_for(request.user)
        apply_each(
            self,
            request,
            queryset.select_related("provider", "org"),
            lambda pause: services.provider_resume(provider=pause.provider, org=pause.org, actor=actor),
            "Ended",
        )
