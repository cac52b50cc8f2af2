"""Webhooks in the admin: endpoints (registered through the service, the secret shown once), their
delivery log with each attempt, and the actions enable, disable and send again."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest

from common.actors import Actor
from common.admin_utils import ServiceModelAdmin, apply_each
from feed import services
from feed.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from feed.selectors import WEBHOOK_TYPES


def _formfield(field: models.Field[Any, Any], **kwargs: Any) -> forms.Field | None:
    """The form field of a model field, a URL's assumed scheme https (the admin builds a subclass of
    the form for a change page, and with it the model's fields again)."""
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return field.formfield(**kwargs)


class WebhookEndpointForm(forms.ModelForm[WebhookEndpoint]):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_types = forms.MultipleChoiceField(choices=[(name, name) for name in WEBHOOK_TYPES])

    class Meta:
        model = WebhookEndpoint
        fields = ["org", "url", "event_types"]
        formfield_callback = _formfield


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ServiceModelAdmin[WebhookEndpoint]):
    form = WebhookEndpointForm
    list_display = ["id", "org", "url", "active", "failing_since", "disabled_at", "created_by"]
    list_filter = ["active", "org"]
    list_select_related = ["org"]
    readonly_fields = ["active", "failing_since", "disabled_at", "disabled_reason", "created_by", "created_at"]
    actions = ["enable", "disable"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The URL and org of an endpoint stay what was registered (and checked): register another.
        return [*self.readonly_fields, "org", "url"] if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.webhook_endpoint_update(
                endpoint=obj, event_types=data["event_types"], actor=Actor.operator(request.user)
            )
            return
        endpoint, secret = services.webhook_endpoint_create(
            org=data["org"], url=data["url"], event_types=data["event_types"], actor=Actor.operator(request.user)
        )
        obj.pk = endpoint.pk
        self.message_user(request, f"The endpoint's signing secret (shown this once): {secret}", messages.WARNING)

    @admin.action(description="Enable the selected endpoints (they resume where they stopped)")
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        apply_each(
            self,
            request,
            queryset,
            lambda e: services.webhook_endpoint_update(endpoint=e, active=True, actor=Actor.operator(request.user)),
            "Enabled",
        )

    @admin.action(description="Disable the selected endpoints")
    def disable(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> None:
        apply_each(
            self,
            request,
            queryset,
            lambda e: services.webhook_endpoint_update(endpoint=e, active=False, actor=Actor.operator(request.user)),
            "Disabled",
        )


class WebhookAttemptInline(admin.TabularInline[WebhookAttempt, WebhookDelivery]):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = readonly_fields = ("number", "at", "status", "latency_ms", "response_excerpt", "error")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin[WebhookDelivery]):
    list_display = ["id", "endpoint", "event_type", "state", "attempt_count", "next_attempt_at", "delivered_at"]
    list_filter = ["state", "event_type"]
    list_select_related = ["endpoint__org"]
    search_fields = ["event_id", "idempotency_key"]
    show_full_result_count = False
    inlines = [WebhookAttemptInline]
    actions = ["send_again"]
    readonly_fields = [
        "endpoint", "event_id", "event_type", "body", "idempotency_key", "state", "attempt_count",
        "next_attempt_at", "created_at", "delivered_at",
    ]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Send the selected deliveries again (same idempotency key)")
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        apply_each(
            self,
            request,
            queryset.select_related("endpoint"),
            lambda d: services.webhook_delivery_send_again(
                endpoint=d.endpoint, delivery_id=d.pk, actor=Actor.operator(request.user)
            ),
            "Queued again",
        )
