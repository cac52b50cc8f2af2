"""Tenants and what they run: orgs, their members, workflows, per-(org, workflow) costs, providers."""

from __future__ import annotations

from datetime import UTC

from django.conf import settings
from django.db import models
from django.db.models import Q

from common.txid import CurrentTransactionId


def holds(weight: int) -> bool:
    """Whether an org of this weight is on hold (nothing of it dispatches or competes): the one
    rule, for an `Org` and for the rows the snapshot reads."""
    return weight == 0


class Org(models.Model):
    """A tenant. Its weight is its share of each round; weight 0 means held (nothing dispatches)."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    weight = models.PositiveIntegerField(default=1, help_text="Share per round; 0 holds the org.")
    weight_before_hold = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The weight a release restores."
    )
    hold_reason = models.CharField(
        max_length=500,
        blank=True,
        editable=False,
        help_text="Why the org is held, written for its members (they see it); cleared on release.",
    )
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many charts of the org run at once (empty: no cap)."
    )
    queue_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Admission refuses submissions past this many waiting charts."
    )
    turnaround = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds from submission in which a chart is promised (empty: no promise)."
    )
    turnaround_share = models.FloatField(
        null=True, blank=True, help_text="Share of charts promised within the turnaround, above 0 and at most 1."
    )
    clear_at = models.DateTimeField(null=True, blank=True, editable=False, help_text="Predicted end of backlog.")
    clear_low = models.DateTimeField(null=True, blank=True, editable=False, help_text="p10 of the predicted end.")
    clear_high = models.DateTimeField(null=True, blank=True, editable=False, help_text="p90 of the predicted end.")
    served = models.FloatField(
        default=0.0,
        editable=False,
        help_text=(
            "Virtual time in rounds: each fair-tier start adds 1/weight (or cost/(weight x quantum) under"
            " deficit); an org that cannot start is raised to the round under way at each replan."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(weight__gte=0), name="org_weight_gte_0"),
            models.CheckConstraint(
                condition=Q(max_concurrency__isnull=True) | Q(max_concurrency__gte=1), name="org_cap_gte_1"
            ),
            models.CheckConstraint(
                condition=Q(queue_limit__isnull=True) | Q(queue_limit__gte=1), name="org_queue_limit_gte_1"
            ),
            models.CheckConstraint(
                condition=Q(turnaround__isnull=True) | Q(turnaround__gte=1), name="org_turnaround_gte_1"
            ),
            models.CheckConstraint(
                condition=Q(turnaround_share__isnull=True) | (Q(turnaround_share__gt=0) & Q(turnaround_share__lte=1)),
                name="org_turnaround_share_0_1",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_held(self) -> bool:
        return holds(self.weight)


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org"], name="membership_user_org_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.org} ({self.role})"

    @property
    def can_write(self) -> bool:
        return self.role != self.Role.VIEWER


class Provider(models.Model):
    """A downstream service that workflows call; it can be paused when it throttles."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class Workflow(models.Model):
    """A kind of chart: the Temporal workflow type it starts, on which task queue, at what cost."""

    name = models.CharField(max_length=200, unique=True)
    workflow_type = models.CharField(max_length=200, help_text="Temporal workflow type name.")
    task_queue = models.CharField(max_length=200)
    default_cost = models.PositiveIntegerField(default=1, help_text="Budget units a run occupies.")
    provider = models.ForeignKey(Provider, null=True, blank=True, on_delete=models.SET_NULL, related_name="workflows")
    params = models.JSONField(default=dict, blank=True, help_text="Passed to every run of this workflow.")
    run_timeout = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds a run may take before Temporal times it out (empty: FAIRSCHED_RUN_TIMEOUT).",
    )
    initial_duration = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds a run is expected to take, until runs of it have been seen: learned durations"
        " replace it (empty: FAIRSCHED_DEFAULT_DURATION).",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(default_cost__gte=1), name="workflow_cost_gte_1"),
            models.CheckConstraint(
                condition=Q(run_timeout__isnull=True) | Q(run_timeout__gte=1), name="workflow_run_timeout_gte_1"
            ),
            models.CheckConstraint(
                condition=Q(initial_duration__isnull=True) | Q(initial_duration__gte=1),
                name="workflow_initial_duration_gte_1",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def effective_run_timeout(self) -> int:
        """The run timeout in seconds: the workflow's own, or the deployment's default."""
        return self.run_timeout or settings.FAIRSCHED_RUN_TIMEOUT


class WorkflowCost(models.Model):
    """What one run of a workflow costs for one org, overriding the workflow's default cost."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="workflow_costs")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="org_costs")
    cost = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "workflow"], name="workflow_cost_org_workflow_unique"),
            models.CheckConstraint(condition=Q(cost__gte=1), name="workflow_cost_cost_gte_1"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow} for {self.org}: {self.cost}"


class WorkflowTurnaround(models.Model):
    """An org's turnaround promise for one workflow, overriding the org's own."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="workflow_turnarounds")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="org_turnarounds")
    turnaround = models.PositiveIntegerField(help_text="Seconds from submission in which a chart is promised.")
    share = models.FloatField(null=True, blank=True, help_text="Share of charts promised within it (empty: the org's).")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "workflow"], name="workflow_turnaround_org_workflow_unique"),
            models.CheckConstraint(condition=Q(turnaround__gte=1), name="workflow_turnaround_gte_1"),
            models.CheckConstraint(
                condition=Q(share__isnull=True) | (Q(share__gt=0) & Q(share__lte=1)),
                name="workflow_turnaround_share_0_1",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow} for {self.org}: within {self.turnaround} s"


class ProviderPause(models.Model):
    """A provider paused until a time, for everyone (org empty) or for one org (Retry-After semantics)."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="pauses")
    org = models.ForeignKey(Org, null=True, blank=True, on_delete=models.CASCADE, related_name="provider_pauses")
    until = models.DateTimeField()
    reason = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-until"]
        indexes = [models.Index(fields=["until"], name="provider_pause_until_idx")]

    def __str__(self) -> str:
        scope = self.org.slug if self.org is not None else "everyone"
        return f"{self.provider} paused for {scope} until {self.until.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


class OrgChange(models.Model):
    """The change history of an org: who changed weight, hold, cap, queue limit or a cost, when, why."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="changes")
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
        indexes = [
            models.Index(fields=["org", "-at"], name="org_change_org_at_idx"),
            models.Index(fields=["txid", "id"], name="org_change_txid_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.org}: {self.field} {self.old_value} -> {self.new_value} by {self.actor}"


class ApiToken(models.Model):
    """A credential for the REST API, scoped to one org (acts only within it) or to staff.

    Only a SHA-256 digest of the secret is stored; the secret itself is shown once, when issued.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    org = models.ForeignKey(
        Org, null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens", help_text="Empty: staff."
    )
    is_staff = models.BooleanField(default=False, help_text="Acts as staff; the user must be staff too.")
    name = models.CharField(max_length=200, blank=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False, help_text="SHA-256 of the secret.")
    prefix = models.CharField(
        max_length=8, editable=False, help_text="The secret's first characters, to tell tokens apart."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # Exactly one scope: an org, or staff.
            models.CheckConstraint(
                condition=(Q(org__isnull=False) & Q(is_staff=False)) | (Q(org__isnull=True) & Q(is_staff=True)),
                name="api_token_one_scope",
            )
        ]

    def __str__(self) -> str:
        scope = "staff" if self.is_staff or self.org is None else self.org.slug
        return f"{self.prefix}… of {self.user} ({scope})"


class ViewerZone(models.Model):
    """The time zone a user reads times in, on the portal, the dashboard and the admin alike (the zone
    picker sets it); a user without one reads them in the browser's zone."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="viewer_zone")
    # An IANA zone name (`zoneinfo.available_timezones`), checked by `viewer_zone_set`.
    zone = models.CharField(max_length=64)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: {self.zone}"
