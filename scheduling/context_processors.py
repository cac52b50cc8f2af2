"""What the scheduler adds to every template's context, for the pages of the apps below it (the
portal's views live in charts, which may not import scheduling: the layers contract)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from knobs.models import SchedulerConfig
from scheduling.models import QueueSample

# A live page whose plan is older than this many replan intervals says so instead of ticking.
STALE_AFTER_REPLANS = 3


def plan_freshness() -> dict[str, Any]:
    """How fresh the plan is, for a live page to say when it stops being so: the latest replan's time
    (its queue sample), the server's clock, and the age (three replan intervals) past which the page
    says it is stale."""
    stale_after = STALE_AFTER_REPLANS * SchedulerConfig.load().replan_interval
    planned_at = QueueSample.objects.order_by("-at").values_list("at", flat=True).first()
    now = timezone.now()
    return {
        "planned_at": planned_at,
        "now": now,
        "stale_after": stale_after,
        "stale": planned_at is not None and (now - planned_at).total_seconds() > stale_after,
    }


def freshness(request: HttpRequest) -> dict[str, Any]:
    """`freshness`, read only by a template that shows it (the portal's live parts): other pages pay nothing."""
    return {"freshness": SimpleLazyObject(plan_freshness)}
