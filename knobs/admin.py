"""The scheduler's configuration in the admin; every change goes through `scheduler_config_set`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from common.actors import Actor
from common.admin_utils import ServiceModelAdmin, reason_field
from knobs.levers import CONFIG_BOUNDS, SWITCHES
from knobs.models import ConfigChange, SchedulerConfig
from knobs.services import scheduler_config_set


class SchedulerConfigForm(ModelForm[SchedulerConfig]):
    reason = reason_field("Why, in one line: kept in the change log with each setting this save changes.")

    class Meta:
        model = SchedulerConfig
        fields = ["budget", "policy", *(name for name in CONFIG_BOUNDS if name != "budget"), *sorted(SWITCHES)]


@admin.register(SchedulerConfig)
class SchedulerConfigAdmin(ServiceModelAdmin[SchedulerConfig]):
    list_display = ["__str__", "budget", "policy", "max_attempts", "updated_at"]
    form = SchedulerConfigForm

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        config = SchedulerConfig.load()
        return HttpResponseRedirect(reverse("admin:knobs_schedulerconfig_change", args=[config.pk]))

    def save_model(
        self, request: HttpRequest, obj: SchedulerConfig, form: ModelForm[SchedulerConfig], change: bool
    ) -> None:
        values = {field: form.cleaned_data[field] for field in form.changed_data if field != "reason"}
        scheduler_config_set(actor=Actor.operator(request.user), reason=form.cleaned_data.get("reason", ""), **values)


@admin.register(ConfigChange)
class ConfigChangeAdmin(admin.ModelAdmin[ConfigChange]):
    list_display = ["at", "actor", "field", "old_value", "new_value", "reason"]
    list_filter = ["field"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
