"""The feed's and the webhooks' API shapes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.strict import CommaChoiceField, StrictCharField, StrictQuerySerializer, StrictSerializer
from feed.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from feed.selectors import MAX_PAGE_SIZE, WEBHOOK_TYPES

MAX_WAIT = 30


class FeedQuerySerializer(StrictQuerySerializer):
    """The feed's query: where to read on from, how long to wait for news, how many events at most."""

    after = serializers.CharField(
        required=False,
        max_length=80,
        help_text="The `cursor` of the previous answer; none to read from the beginning.",
    )
    wait = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_WAIT,
        help_text=f"Seconds (at most {MAX_WAIT}) to wait for an event when there is none yet (a long poll).",
    )
    page_size = serializers.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE)

    def to_internal_value(self, data: Any) -> Any:
        if "cursor" in data:
            raise serializers.ValidationError({"cursor": ["this feed reads on from `after=<cursor>`"]})
        return super().to_internal_value(data)


class FeedEventSerializer(serializers.Serializer[Any]):
    """One event. Which fields are set depends on its type: a chart's (`chart.*`), a lever's (`org.*`,
    `scheduler.changed`: field, old and new value) or a clear-time slip's (clear_before, clear_at)."""

    id = serializers.CharField(help_text="Unique and stable: the cursor just after this event.")
    type = serializers.CharField()
    at = serializers.DateTimeField()
    org = serializers.CharField(allow_null=True)
    actor = serializers.CharField()
    reason = serializers.CharField()
    chart = serializers.IntegerField(allow_null=True)
    external_id = serializers.CharField(allow_null=True)
    workflow = serializers.CharField(allow_null=True)
    from_state = serializers.CharField(allow_null=True)
    to_state = serializers.CharField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    old_value = serializers.CharField(allow_null=True)
    new_value = serializers.CharField(allow_null=True)
    clear_before = serializers.DateTimeField(allow_null=True)
    clear_at = serializers.DateTimeField(allow_null=True)


class FeedPageSerializer(serializers.Serializer[Any]):
    results = FeedEventSerializer(many=True)
    cursor = serializers.CharField(help_text="Give it as `after` to read on; the same cursor if nothing came.")


class WebhookEndpointSerializer(serializers.ModelSerializer[WebhookEndpoint]):
    org: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    event_types = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = WebhookEndpoint
        fields = [
            "id",
            "org",
            "url",
            "event_types",
            "active",
            "failing_since",
            "disabled_at",
            "disabled_reason",
            "created_at",
            "created_by",
        ]
        read_only_fields = fields


class WebhookEndpointCreatedSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(help_text="Shown this once: keep it to check the signatures.")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookEndpointCreateSerializer(StrictSerializer):
    org = serializers.SlugField(
        required=False, allow_null=True, max_length=100, help_text="The org whose events it hears; none: every org."
    )
    url = StrictCharField(max_length=2000)
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=WEBHOOK_TYPES), min_length=1, max_length=len(WEBHOOK_TYPES)
    )


class WebhookEndpointUpdateSerializer(StrictSerializer):
    active = serializers.BooleanField(required=False, help_text="true re-enables a disabled endpoint.")
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=WEBHOOK_TYPES),
        min_length=1,
        max_length=len(WEBHOOK_TYPES),
        required=False,
    )


class WebhookAttemptSerializer(serializers.ModelSerializer[WebhookAttempt]):
    class Meta:
        model = WebhookAttempt
        fields = ["number", "at", "status", "latency_ms", "response_excerpt", "error"]
        read_only_fields = fields


class WebhookDeliverySerializer(serializers.ModelSerializer[WebhookDelivery]):
    attempts = WebhookAttemptSerializer(many=True, read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "idempotency_key",
            "state",
            "attempt_count",
            "next_attempt_at",
            "created_at",
            "delivered_at",
            "attempts",
        ]
        read_only_fields = fields


class DeliveryFilterSerializer(StrictQuerySerializer):
    state = CommaChoiceField(choices=WebhookDelivery.State.values, required=False)
