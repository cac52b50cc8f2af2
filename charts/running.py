"""A run that has lasted longer than the plan expects of it ("overdue"), and how that is told.

The replan stores each in-flight chart's expected duration with its plan (`ChartPlan.expected_duration`,
the `avg` its ETA was computed from); whether the run is past it is read against the clock of the
reader, so a chart crosses it when it does, not at the next replan. Its ETA and band are the plan's:
for a run with a known spread, its median time left given how long it has run (never before the
plan's now, `scheduling.core.forecast.remaining_time`).
"""

from __future__ import annotations

from datetime import datetime

from charts.models import IN_FLIGHT_STATES, Chart

RUNNING_LONGER = "Running longer than usual"


def chart_overdue(chart: Chart, *, now: datetime) -> bool:
    """Whether `chart` (with its plan joined in) is in flight, started, and has run longer than the
    plan expects of it."""
    return chart.state in IN_FLIGHT_STATES and run_overdue(
        started_at=chart.started_at, expected_duration=getattr(chart, "expected_duration", None), now=now
    )


def run_overdue(*, started_at: datetime | None, expected_duration: float | None, now: datetime) -> bool:
    """Whether a run started at `started_at` has lasted longer than `expected_duration` seconds by
    `now` (neither known: no)."""
    return (
        started_at is not None
        and expected_duration is not None
        and (now - started_at).total_seconds() > expected_duration
    )


def overdue_words(chart: Chart, *, now: datetime) -> str:
    """'Running longer than usual (it usually takes about 2 min; 5 min so far)', or '' when the chart
    is not overdue."""
    if not chart_overdue(chart, now=now) or chart.started_at is None:
        return ""
    expected = float(chart.expected_duration)  # type: ignore[attr-defined]  # joined in by ChartManager
    elapsed = (now - chart.started_at).total_seconds()
    return f"{RUNNING_LONGER} (it usually takes about {duration_words(expected)}; {duration_words(elapsed)} so far)"


def duration_words(seconds: float) -> str:
    """'40 s', '4 min', '2 h 5 min', '3 days' (the portal's amounts, `portal_time.relative`)."""
    size = round(seconds)
    if size < 60:
        return f"{size} s"
    if size < 90 * 60:
        return f"{round(size / 60)} min"
    if size < 48 * 3600:
        hours, minutes = divmod(round(size / 60), 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{round(size / 86400)} days"
