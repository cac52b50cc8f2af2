"""What the replans leave behind: the orgs' clear-time slips (a feed event) and the queue's samples."""

from __future__ import annotations

from django.db import models

from common.txid import CurrentTransactionId


class ClearTimeSlip(models.Model):
    """An org's predicted clear-time moved later, at one replan, by more than
    `FAIRSCHED_FEED_SLIP_SHARE` of the wait it had predicted (and at least
    `FAIRSCHED_FEED_SLIP_MIN_SECONDS`): an event of the change feed (`org.clear_time_slipped`)."""

    org = models.ForeignKey("orgs.Org", on_delete=models.CASCADE, related_name="clear_time_slips")
    clear_before = models.DateTimeField(help_text="The clear-time the previous replan predicted.")
    clear_at = models.DateTimeField(help_text="The clear-time this replan predicts.")
    at = models.DateTimeField()
    txid = models.BigIntegerField(db_default=CurrentTransactionId(), editable=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["txid", "id"], name="clear_time_slip_txid_idx")]

    def __str__(self) -> str:
        return f"{self.org_id}: clear-time {self.clear_before:%H:%M:%S} -> {self.clear_at:%H:%M:%S}"


class QueueSample(models.Model):
    """What the queue looked like at one replan: the history behind the dashboard's plots."""

    at = models.DateTimeField(db_index=True)
    queued = models.PositiveIntegerField()
    running = models.PositiveIntegerField()
    budget = models.PositiveIntegerField()
    cost_in_use = models.PositiveIntegerField()
    global_clear = models.DateTimeField(null=True, blank=True)
    per_org = models.JSONField(default=dict, help_text="org slug -> {queued, running, cost_in_use, clear_at}")

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S}: {self.queued} queued, {self.cost_in_use}/{self.budget} in use"
