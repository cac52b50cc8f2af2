"""Whether a chart keeps its turnaround promise: "on track", "at risk" or "late", one rule for every reader.

A chart with a due time (`Chart.due_at`) is, at `now`:

- **late** when it has not finished and `now` is past its due time, or when it finished after it;
- **at risk** when it waits or runs, is not yet past due, and the last replan gives it a chance of
  finishing after its due time (`ChartPlan.late_chance`) at or above the scheduler's threshold
  (`SchedulerConfig.at_risk_threshold`);
- **on track** otherwise (a chart the plan has no chance for yet is on track until it is past due).

A chart without a due time is none of these. The rule for the charts that wait or run is one
function on arrays (`open_verdicts`), which a chart at hand (`promise_of`: the API's fields and the
portal's words) and a plan's charts (`scheduling.rescue.plan_risk`: the rescue's counts before and
after a change) both call; it is written again only as conditions on a queryset (`at_risk_q`,
`late_q`: the API's filters, the dashboard's panel and the metrics), which
`tests/charts/test_promise.py` holds to it (and `tests/scheduling/test_rescue_risk.py` holds the
rescue's counts to `chart_promise`). The threshold comes with the chart, in the same statement as
the chart (`THRESHOLD_SQL`, `with_threshold`), so that no page or API read spends a query on it.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
from django.db.models import BooleanField, Case, F, FloatField, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce
from numpy.typing import ArrayLike, NDArray

from charts.models import ACTIVE_STATES, TERMINAL_STATES, Chart
from knobs.models import SchedulerConfig

ON_TRACK = "on track"
AT_RISK = "at risk"
LATE = "late"

# The threshold of a scheduler that has never been configured (no row yet): the field's default.
DEFAULT_THRESHOLD = float(SchedulerConfig._meta.get_field("at_risk_threshold").default)
# The threshold as a column of a chart's statement, by that name (`THRESHOLD_ATTRIBUTE`); NULL without
# the config row, which `chart_promise` reads as the default.
THRESHOLD_ATTRIBUTE = "at_risk_threshold"
THRESHOLD_SQL = f'(SELECT "at_risk_threshold" FROM "{SchedulerConfig._meta.db_table}" WHERE "id" = 1)'  # noqa: S608 (a model's names)


def open_verdicts(
    *, due: ArrayLike, late_chance: ArrayLike, threshold: float, now: float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """The rule for charts that wait or run, on aligned arrays: each chart's (at risk, late), for its
    due time `due` and its plan's `late_chance` (NaN: none), at `now` (times in seconds since the
    epoch). Late: past its due time; at risk: not past it, and a chance at or above `threshold`. A
    chart without a due time (NaN) is neither."""
    due_at = np.asarray(due, dtype=np.float64)
    chance = np.asarray(late_chance, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN compares False: no due time, no chance
        late = now > due_at
        at_risk = (due_at >= now) & (chance >= threshold)
    return at_risk, late


def promise_of(
    *,
    state: str,
    due_at: datetime | None,
    finished_at: datetime | None,
    late_chance: float | None,
    threshold: float,
    now: datetime,
) -> str | None:
    """ON_TRACK, AT_RISK or LATE for a chart in `state` due at `due_at`; None without a due time."""
    if due_at is None:
        return None
    if state in TERMINAL_STATES:
        return LATE if finished_at is not None and finished_at > due_at else ON_TRACK
    at_risk, late = open_verdicts(
        due=due_at.timestamp(),
        late_chance=np.nan if late_chance is None else late_chance,
        threshold=threshold,
        now=now.timestamp(),
    )
    return LATE if late else AT_RISK if at_risk else ON_TRACK


def chart_promise(chart: Chart, *, now: datetime) -> str | None:
    """`promise_of` a chart with its plan joined in (its threshold too, where its statement read it)."""
    return promise_of(
        state=chart.state,
        due_at=chart.due_at,
        finished_at=chart.finished_at,
        late_chance=getattr(chart, "late_chance", None),
        threshold=getattr(chart, THRESHOLD_ATTRIBUTE, None) or DEFAULT_THRESHOLD,
        now=now,
    )


def threshold_expression() -> Coalesce:
    """The scheduler's at-risk threshold as an expression (a scalar subquery of the one config row)."""
    configured = Subquery(SchedulerConfig.objects.filter(pk=1).values("at_risk_threshold")[:1])
    return Coalesce(configured, Value(DEFAULT_THRESHOLD), output_field=FloatField())


def with_threshold(charts: QuerySet[Chart]) -> QuerySet[Chart]:
    """`charts` with the threshold read in the same statement (as `at_risk_threshold`)."""
    return charts.annotate(**{THRESHOLD_ATTRIBUTE: threshold_expression()})


def at_risk_q(*, now: datetime, prefix: str = "") -> Q:
    """At risk, as a condition on charts (`prefix`: the path to them, "charts__" from an org); the
    threshold is read in the same statement (PostgreSQL evaluates the subquery once)."""
    return Q(
        **{
            f"{prefix}state__in": ACTIVE_STATES,
            f"{prefix}due_at__gte": now,
            f"{prefix}plan__late_chance__gte": threshold_expression(),
        }
    )


def late_q(*, now: datetime, prefix: str = "") -> Q:
    """Late, as a condition on charts (`prefix` as for `at_risk_q`)."""
    unfinished = Q(**{f"{prefix}state__in": ACTIVE_STATES, f"{prefix}due_at__lt": now})
    finished_after = Q(**{f"{prefix}state__in": TERMINAL_STATES, f"{prefix}finished_at__gt": F(f"{prefix}due_at")})
    return unfinished | finished_after


def as_flag(condition: Q) -> Case:
    """`condition` as a true/false column (never NULL, so that `=false` finds every chart it does not hold for)."""
    return Case(When(condition, then=Value(True)), default=Value(False), output_field=BooleanField())
