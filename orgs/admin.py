"""The account managers' admin: tenants, their costs, caps, queue limits, holds and history.

Every change goes through `orgs.services`, so it is validated, logged in the org's history with the
user who made it, and followed by a replan.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import Field, QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from common.actors import Actor
from common.admin_times import admin_time
from common.admin_utils import (
    EditedFieldsForm,
    ReasonActionForm,
    RowLabelledInlineFormSet,
    ServiceModelAdmin,
    action_reason,
    apply_each,
    list_edit_reason,
    reason_field,
)
from common.errors import InvalidInput
from orgs import levers, services
from orgs.access import api_token_revoke
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

# The services' bounds, shown and checked on the admin's fields too (forms, list edits, inlines).
FIELD_BOUNDS = {
    "weight": services.WEIGHT,
    "max_concurrency": services.MAX_CONCURRENCY,
    "queue_limit": services.QUEUE_LIMIT,
    "cost": services.COST,
    "default_cost": services.COST,
    "run_timeout": services.RUN_TIMEOUT,
    "initial_duration": services.RUN_TIMEOUT,
    "turnaround": levers.TURNAROUND,
}

# The newest of an org's history lines its admin History page lists (the change page's inline has all).
HISTORY_SHOWN = 200


def bounded(db_field: Field[Any, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = FIELD_BOUNDS.get(db_field.name)
    return kwargs if bound is None else {**kwargs, **bound.limits}


class WorkflowCostInline(admin.TabularInline[WorkflowCost, Org]):
    model = WorkflowCost
    form = EditedFieldsForm  # a cost someone else set while the page was open is not written back
    formset = RowLabelledInlineFormSet
    extra = 0
    autocomplete_fields = ["workflow"]

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        return super().formfield_for_dbfield(db_field, request, **bounded(db_field, kwargs))


class WorkflowTurnaroundInline(admin.TabularInline[WorkflowTurnaround, Org]):
    model = WorkflowTurnaround
    form = EditedFieldsForm  # a promise someone else set while the page was open is not written back
    extra = 0
    autocomplete_fields = ["workflow"]
    verbose_name = "turnaround for a workflow"
    verbose_name_plural = "turnarounds per workflow (override the org's)"

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        return super().formfield_for_dbfield(db_field, request, **bounded(db_field, kwargs))


class MembershipInline(admin.TabularInline[Membership, Org]):
    model = Membership
    form = EditedFieldsForm  # nor a role someone else gave
    formset = RowLabelledInlineFormSet
    extra = 0
    autocomplete_fields = ["user"]


class OrgChangeInline(admin.TabularInline[OrgChange, Org]):
    model = OrgChange
    extra = 0
    can_delete = False
    fields = readonly_fields = ("when", "actor", "field", "old_value", "new_value", "reason")
    ordering = ["-at", "-id"]
    verbose_name_plural = "change history"

    @admin.display(description="at")
    def when(self, change: OrgChange) -> str:
        """To the second, as a `<time>` the page's script shows in the viewer's zone (static/zone.js)."""
        return admin_time(change.at)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OrgForm(ModelForm[Org]):
    reason = reason_field(
        "Why, in one line: kept in the history with each change this save makes (staff only; the reason"
        " the org's members see is the one given with the Hold action)."
    )

    class Meta:
        model = Org
        fields = ["name", "slug", "weight", "max_concurrency", "queue_limit", "turnaround", "turnaround_share"]


@admin.register(Org)
class OrgAdmin(ServiceModelAdmin[Org]):
    """The orgs' page. The charts app registers it again with each org's queued and running charts
    (`charts.admin.OrgWithChartsAdmin`): counting charts is that app's, above this one."""

    list_display = ["name", "slug", "weight", "held", "max_concurrency", "queue_limit", "clear_at"]
    list_editable = ["weight"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["hold_state", "clear_at", "created_at", "updated_at"]
    form = OrgForm
    fields = [
        "name", "slug", "hold_state", "weight", "max_concurrency", "queue_limit", "turnaround", "turnaround_share",
        "reason", "clear_at", "created_at", "updated_at",
    ]  # fmt: skip
    inlines = [WorkflowCostInline, WorkflowTurnaroundInline, MembershipInline, OrgChangeInline]
    actions = ["hold", "release"]
    action_form = ReasonActionForm

    @admin.display(description="held")
    def held(self, org: Org) -> str:
        """A badge with the hold's reason (what the org's members read), not a check mark: a held org
        is a state to notice, not a setting that is on."""
        if not org.is_held:
            return ""
        return format_html('<strong class="held-badge">Held</strong> {}', org.hold_reason)

    @admin.display(description="hold")
    def hold_state(self, org: Org) -> str:
        if not org.is_held:
            return "Not held"
        return f"Held: {org.hold_reason}" if org.hold_reason else "Held (no reason given)"

    def history_view(self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None) -> Any:
        """Django's history of this admin's saves, and the org's own history: every change of its
        weight, hold, cap, queue limit and costs, made here, on the dashboard or through the API."""
        changes = OrgChange.objects.filter(org_id=object_id) if object_id.isdigit() else OrgChange.objects.none()
        shown = list(changes.order_by("-at", "-id")[:HISTORY_SHOWN])
        context = {
            "org_changes": shown,
            "org_changes_more": len(shown) == HISTORY_SHOWN and changes.count() > len(shown),
        }
        return super().history_view(request, object_id, {**(extra_context or {}), **context})

    def response_action(self, request: HttpRequest, queryset: QuerySet[Org]) -> HttpResponse | None:
        """An action posted from an org's change page (its hold or release button) goes back there."""
        response = super().response_action(request, queryset)
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        if response is not None and "_change_page" in request.POST and len(selected) == 1 and selected[0].isdigit():
            return HttpResponseRedirect(reverse("admin:orgs_org_change", args=[int(selected[0])]))
        return response

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        return super().formfield_for_dbfield(db_field, request, **bounded(db_field, kwargs))

    def save_model(self, request: HttpRequest, obj: Org, form: ModelForm[Org], change: bool) -> None:
        actor = Actor.operator(request.user)
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
        # A list edit's reason is the action bar's (`ReasonActionForm`), posted with the list's rows.
        reason = form.cleaned_data["reason"] if "reason" in form.fields else list_edit_reason(request)
        setters = {
            # Against the weight the page showed, under the org's lock: a list's rows are compared
            # before the save's transaction, so a change landing in between refuses the save.
            "weight": lambda: services.org_weight_set(
                org=obj,
                weight=obj.weight,
                actor=actor,
                reason=reason,
                expected=form.opened("weight") if isinstance(form, EditedFieldsForm) else None,
            ),
            "max_concurrency": lambda: services.org_cap_set(
                org=obj, max_concurrency=obj.max_concurrency, actor=actor, reason=reason
            ),
            "queue_limit": lambda: services.org_queue_limit_set(
                org=obj, queue_limit=obj.queue_limit, actor=actor, reason=reason
            ),
            "turnaround": lambda: services.org_turnaround_set(
                org=obj, turnaround=obj.turnaround, actor=actor, reason=reason
            ),
            "turnaround_share": lambda: services.org_turnaround_share_set(
                org=obj, share=obj.turnaround_share, actor=actor, reason=reason
            ),
        }
        for field in form.changed_data:
            if field in setters:
                setters[field]()
        renamed = {field: getattr(obj, field) for field in ("name", "slug") if field in form.changed_data}
        if renamed:
            Org.objects.filter(pk=obj.pk).update(**renamed)

    def save_formset(
        self, request: HttpRequest, form: Any, formset: BaseInlineFormSet[Any, Any, Any], change: bool
    ) -> None:
        """Per-workflow costs and turnarounds go through their services (`workflow_cost_set`,
        `workflow_turnaround_set`), so each is validated and logged.

        1. Remove the overrides of deleted rows, and of rows moved to another workflow (first, so that
           two rows swapping workflows do not undo each other).
        2. Set the values of every other added or changed row.
        3. Fill in what the admin's change message reads from a saved formset.
        """
        if formset.model is Membership:
            self._save_memberships(request, form.instance, formset)
            return
        actor = Actor.operator(request.user)
        org = form.instance
        reason = form.cleaned_data.get("reason", "")  # the change form's reason, for its rows too
        if formset.model is WorkflowCost:

            def override_set(workflow: Workflow, values: dict[str, Any] | None) -> None:
                cost = None if values is None else values["cost"]
                services.workflow_cost_set(org=org, workflow=workflow, cost=cost, actor=actor, reason=reason)

        elif formset.model is WorkflowTurnaround:

            def override_set(workflow: Workflow, values: dict[str, Any] | None) -> None:
                services.workflow_turnaround_set(
                    org=org,
                    workflow=workflow,
                    turnaround=None if values is None else values["turnaround"],
                    share=None if values is None else values.get("share"),
                    actor=actor,
                    reason=reason,
                )

        else:
            super().save_formset(request, form, formset, change)
            return
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        edited = [f for f in formset.forms if f.has_changed() and "workflow" in f.cleaned_data]
        for inline_form in edited:
            previous = inline_form.initial.get("workflow")  # the row's workflow before the edit (a pk)
            deleted = inline_form.cleaned_data.get("DELETE", False)
            if previous is not None and (deleted or previous != inline_form.cleaned_data["workflow"].pk):
                override_set(Workflow.objects.get(pk=previous), None)
            if deleted:
                formset.deleted_objects.append(inline_form.instance)
        for inline_form in edited:
            if inline_form.cleaned_data.get("DELETE", False):
                continue
            override_set(inline_form.cleaned_data["workflow"], inline_form.cleaned_data)
            if inline_form.instance.pk is None:
                formset.new_objects.append(inline_form.instance)
            else:
                formset.changed_objects.append((inline_form.instance, inline_form.changed_data))

    def _save_memberships(self, request: HttpRequest, org: Org, formset: BaseInlineFormSet[Any, Any, Any]) -> None:
        """Members are added, given a role and removed by the services the API calls, so each change
        is checked and logged in the org's history."""
        actor = Actor.operator(request.user)
        instances = formset.save(commit=False)
        for instance in formset.deleted_objects:
            services.membership_remove(membership=instance, actor=actor)
        for instance in instances:
            if instance.pk is None:
                services.membership_create(user=instance.user, org=org, role=instance.role, actor=actor)
            else:
                services.membership_role_set(membership=instance, role=instance.role, actor=actor)

    @admin.action(description="Hold the selected orgs (nothing of theirs dispatches; their members see the reason)")
    def hold(self, request: HttpRequest, queryset: QuerySet[Org]) -> None:
        actor, reason = Actor.operator(request.user), action_reason(self, request)
        if reason is not None:
            apply_each(
                self, request, queryset, lambda org: services.org_hold(org=org, actor=actor, reason=reason), "Held"
            )

    @admin.action(description="Release the selected orgs")
    def release(self, request: HttpRequest, queryset: QuerySet[Org]) -> None:
        actor, reason = Actor.operator(request.user), action_reason(self, request)
        if reason is not None:
            apply_each(
                self,
                request,
                queryset,
                lambda org: services.org_release(org=org, actor=actor, reason=reason),
                "Released",
            )


@admin.register(Workflow)
class WorkflowAdmin(ServiceModelAdmin[Workflow]):
    """Register and change workflows through `workflow_register` and `workflow_change`, as the API does."""

    list_display = ["name", "workflow_type", "task_queue", "default_cost", "provider", "run_timeout_shown"]
    list_filter = ["provider"]
    search_fields = ["name", "workflow_type"]

    @admin.display(description="run timeout (s)", ordering="run_timeout")
    def run_timeout_shown(self, workflow: Workflow) -> str:
        if workflow.run_timeout is None:
            return f"{workflow.effective_run_timeout} (default)"
        return str(workflow.run_timeout)

    def formfield_for_dbfield(self, db_field: Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        return super().formfield_for_dbfield(db_field, request, **bounded(db_field, kwargs))

    def save_model(self, request: HttpRequest, obj: Workflow, form: ModelForm[Workflow], change: bool) -> None:
        actor = Actor.operator(request.user)
        values = {field: getattr(obj, field) for field in services.WORKFLOW_FIELDS}
        if not change:
            obj.pk = services.workflow_register(actor=actor, **values).pk
            return
        moved = {field: values[field] for field in form.changed_data if field in services.WORKFLOW_FIELDS}
        if moved:
            services.workflow_change(workflow=obj, actor=actor, **moved)


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
        try:
            return levers.pause_until_check(self.cleaned_data["until"], now=timezone.now())
        except InvalidInput as error:
            raise ValidationError(error.message) from None


@admin.register(ProviderPause)
class ProviderPauseAdmin(ServiceModelAdmin[ProviderPause]):
    """Pause a provider for everyone (org empty) or for one org until a time."""

    form = ProviderPauseForm
    list_display = ["provider", "org", "until", "reason", "created_by", "created_at"]
    list_filter = ["provider", "org"]
    fields = ["provider", "org", "until", "reason"]
    autocomplete_fields = ["provider", "org"]
    actions = ["end_now"]
    action_form = ReasonActionForm

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(
        self, request: HttpRequest, obj: ProviderPause, form: ModelForm[ProviderPause], change: bool
    ) -> None:
        pause = services.provider_pause(
            provider=obj.provider, org=obj.org, until=obj.until, reason=obj.reason, actor=Actor.operator(request.user)
        )
        obj.pk = pause.pk

    @admin.action(description="End the selected pauses now")
    def end_now(self, request: HttpRequest, queryset: QuerySet[ProviderPause]) -> None:
        actor, reason = Actor.operator(request.user), action_reason(self, request)
        if reason is None:
            return
        apply_each(
            self,
            request,
            queryset.select_related("provider", "org"),
            lambda pause: services.provider_resume(provider=pause.provider, org=pause.org, actor=actor, reason=reason),
            "Ended",
        )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    """Tokens are issued by `manage.py issue_token` (the secret is shown once); here they are listed and
    revoked (deleted)."""

    list_display = ["prefix", "user", "org", "is_staff", "name", "created_at", "last_used_at"]
    list_filter = ["is_staff", "org"]
    search_fields = ["prefix", "user__username", "name"]
    list_select_related = ["user", "org"]
    readonly_fields = ["prefix", "user", "org", "is_staff", "name", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        api_token_revoke(token_id=obj.pk, actor=Actor.operator(request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            self.delete_model(request, token)
