"""The scheduler's configuration: one row, edited by operators, read by every pass; and its change log.

It sits below the apps that read it (charts reads the retry limit and the largest aging bonus,
scheduling everything), so none of them imports upward.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from common.txid import CurrentTransactionId


class SchedulerConfig(models.Model):
    """The singleton (pk 1) holding budget, policy and the pass and retry settings."""

    class Policy(models.TextChoices):
        ROUND_ROBIN = "round_robin", "Weighted round robin (by chart)"
        DEFICIT = "deficit", "Deficit round robin (by cost)"

    budget = models.PositiveIntegerField(default=10, help_text="Cost units that may run at once.")
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.ROUND_ROBIN)
    quantum = models.FloatField(default=1.0, help_text="Deficit credit per unit of weight per round.")
    aging_step = models.FloatField(null=True, blank=True, help_text="Seconds of waiting per +1 priority.")
    aging_cap = models.PositiveIntegerField(default=0, help_text="Largest waiting bonus.")
    replan_interval = models.FloatField(default=5.0, help_text="Seconds between replans.")
    reconcile_interval = models.FloatField(default=5.0, help_text="Seconds between reconciles.")
    dispatch_stale_after = models.FloatField(
        default=60.0, help_text="Seconds after which a claimed chart whose workflow never started is requeued."
    )
    max_attempts = models.PositiveIntegerField(default=3, help_text="Runs of a chart before it fails.")
    backoff_base = models.FloatField(default=10.0, help_text="Seconds of the first retry delay.")
    backoff_ceiling = models.FloatField(default=600.0, help_text="Longest retry delay in seconds.")
    retry_budget_share = models.FloatField(
        default=0.5, help_text="Share of the budget that retries may occupy (0 to 1)."
    )
    arrival_window = models.FloatField(
        default=600.0,
        help_text="Seconds over which the ETAs' arrival forecast forgets: a submission counts e^-1 as much one "
        "window later; the last 5 windows are read (0 turns the forecast off).",
    )
    at_risk_threshold = models.FloatField(
        default=0.5, help_text="A chart is at risk when its chance of finishing after its due time is at least this."
    )
    due_first = models.BooleanField(
        default=False,
        help_text="Inside each org's share, its charts go by due time (the rounds across orgs unchanged).",
    )
    rescue_max_budget = models.PositiveIntegerField(
        null=True, blank=True, help_text="The largest budget a rescue may propose (empty: the budget, unchanged)."
    )
    rescue_max_weight = models.PositiveIntegerField(
        default=10, help_text="The largest org weight a rescue may propose."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "scheduler configuration"
        verbose_name_plural = "scheduler configuration"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="scheduler_config_singleton"),
            models.CheckConstraint(condition=Q(budget__gte=1), name="scheduler_budget_gte_1"),
            models.CheckConstraint(condition=Q(quantum__gt=0), name="scheduler_quantum_gt_0"),
            models.CheckConstraint(
                condition=Q(aging_step__isnull=True) | Q(aging_step__gt=0), name="scheduler_aging_step_gt_0"
            ),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="scheduler_max_attempts_gte_1"),
            models.CheckConstraint(condition=Q(backoff_base__gte=0), name="scheduler_backoff_base_gte_0"),
            models.CheckConstraint(
                condition=Q(backoff_ceiling__gte=models.F("backoff_base")), name="scheduler_backoff_ceiling_gte_base"
            ),
            models.CheckConstraint(
                condition=Q(retry_budget_share__gte=0) & Q(retry_budget_share__lte=1),
                name="scheduler_retry_share_0_1",
            ),
            models.CheckConstraint(condition=Q(replan_interval__gt=0), name="scheduler_replan_interval_gt_0"),
            models.CheckConstraint(condition=Q(reconcile_interval__gt=0), name="scheduler_reconcile_interval_gt_0"),
            models.CheckConstraint(condition=Q(arrival_window__gte=0), name="scheduler_arrival_window_gte_0"),
            models.CheckConstraint(
                condition=Q(at_risk_threshold__gt=0) & Q(at_risk_threshold__lte=1),
                name="scheduler_at_risk_threshold_0_1",
            ),
            models.CheckConstraint(
                condition=Q(rescue_max_budget__isnull=True) | Q(rescue_max_budget__gte=1),
                name="scheduler_rescue_max_budget_gte_1",
            ),
            models.CheckConstraint(condition=Q(rescue_max_weight__gte=1), name="scheduler_rescue_max_weight_gte_1"),
        ]

    def __str__(self) -> str:
        return f"budget {self.budget}, {self.get_policy_display()}"

    @classmethod
    def load(cls) -> SchedulerConfig:
        config, _ = cls.objects.get_or_create(id=1)
        return config

    @property
    def retry_budget(self) -> int:
        """Cost units that retries may occupy together: at least one unit unless the share is 0."""
        if self.retry_budget_share <= 0:
            return 0
        return max(1, int(self.budget * self.retry_budget_share))


class ConfigChange(models.Model):
    """Who changed which scheduler setting, from what to what, and when."""

    actor = models.CharField(max_length=200)
    field = models.CharField(max_length=100)
    old_value = models.CharField(max_length=200, blank=True)
    new_value = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    at = models.DateTimeField(auto_now_add=True)
    # The writing transaction, for the change feed's commit-ordered cursor (`common.txid`).
    txid = models.BigIntegerField(db_default=CurrentTransactionId(), editable=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["txid", "id"], name="config_change_txid_idx")]

    def __str__(self) -> str:
        return f"{self.field}: {self.old_value} -> {self.new_value} by {self.actor}"
