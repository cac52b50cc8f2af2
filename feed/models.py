"""Webhooks: endpoints that hear the change feed, and the log of what was sent to them."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class WebhookEndpoint(models.Model):
    """A URL that hears an org's events (or every org's: staff only), of the chosen types.

    `cursor` is where in the change feed the endpoint has been read up to: every event before it has a
    delivery row. The secret signs the deliveries; it is shown once, when the endpoint is created."""

    org = models.ForeignKey(
        "orgs.Org", null=True, blank=True, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=2000)
    event_types = models.JSONField(default=list, help_text="The event types it hears.")
    secret = models.CharField(max_length=100, editable=False)
    active = models.BooleanField(default=True)
    cursor = models.CharField(max_length=80, editable=False, help_text="The change feed's position read up to.")
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_at = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_reason = models.CharField(max_length=500, blank=True, editable=False)
    created_by = models.CharField(max_length=200, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.org.slug if self.org else 'every org'} -> {self.url}"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"


class WebhookDelivery(models.Model):
    """One event to send to one endpoint, sent in id order per endpoint until it is answered 2xx.

    The idempotency key is the endpoint's and the event's: a send again, or a retry after a worker
    died mid-send, carries the same key, so a receiver recognises the duplicate."""

    State = DeliveryState

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=80)
    event_type = models.CharField(max_length=50)
    body = models.TextField(help_text="The JSON body, as signed and sent.")
    idempotency_key = models.CharField(max_length=120)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["endpoint", "id"], condition=Q(state="pending"), name="webhook_delivery_pending_idx"),
            models.Index(fields=["endpoint", "-id"], name="webhook_delivery_endpoint_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id} -> endpoint {self.endpoint_id} ({self.state})"

    @property
    def last_attempt(self) -> WebhookAttempt | None:
        """The latest try (from the attempts the delivery log prefetched, in order)."""
        attempts = list(self.attempts.all())
        return attempts[-1] if attempts else None


class WebhookAttempt(models.Model):
    """One try of a delivery: what the endpoint answered (or why nothing), how fast."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    status = models.PositiveIntegerField(null=True, blank=True, help_text="HTTP status; none if no answer.")
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    response_excerpt = models.CharField(max_length=500, blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="webhook_attempt_unique")]

    def __str__(self) -> str:
        return f"delivery {self.delivery_id} attempt {self.number}: {self.status or self.error}"
