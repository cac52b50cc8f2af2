"""Why a waiting chart is not running now, read from its plan, and told in a customer's words.

The replan stores each chart's reason (`charts.models.WaitingReason`) with its plan; the chart's own
state and its org's hold are newer than any plan, so they win: a chart paused or an org held since
the last replan says so at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from charts.models import WAITING_STATES, Chart, ChartState, WaitingReason


@dataclass(frozen=True)
class ChartWaiting:
    """A waiting chart's reason and when it lifts (`WaitingReason` says exactly what `until` is),
    and for `budget`, the chart at the head of the line it waits behind (None: it is that head)."""

    reason: WaitingReason
    until: datetime | None
    head_of_line: int | None = None


# Reasons that the chart's state and its org's hold decide (step 1): from a plan alone, they are old.
STALE_AFTER_LIFTING = (WaitingReason.CHART_PAUSED, WaitingReason.ORG_HELD)


def chart_waiting(chart: Chart) -> ChartWaiting | None:
    """Why `chart` (with its plan joined in and its org loaded) waits; None when it does not wait
    (in flight, finished) or when the last replan starts it now.

    1. Its org is held: `org_held`; the chart is paused: `chart_paused`.
    2. It has no place in a plan yet (just submitted, or back from a run since the last replan), or the
       plan's reason is a pause or hold lifted since: `not_yet_planned`.
    3. Otherwise the plan's reason and time.
    """
    if chart.state not in WAITING_STATES:
        return None
    if chart.org.weight == 0:
        return ChartWaiting(WaitingReason.ORG_HELD, None)
    if chart.state == ChartState.PAUSED:
        return ChartWaiting(WaitingReason.CHART_PAUSED, None)
    reason = getattr(chart, "waiting_reason", None)
    # A plan's pause or hold that no longer is (resumed, released since the replan) says nothing yet.
    if (getattr(chart, "position", None) is None and not reason) or reason in STALE_AFTER_LIFTING:
        return ChartWaiting(WaitingReason.NOT_YET_PLANNED, None)
    if not reason:
        return None
    return ChartWaiting(WaitingReason(reason), chart.waiting_until, chart.head_of_line)  # type: ignore[attr-defined]


def waiting_words(chart: Chart, *, max_attempts: int, failed_at: datetime | None = None) -> SafeString | str:
    """Why `chart` waits, in its org's words; empty when it does not wait."""
    waiting = chart_waiting(chart)
    return "" if waiting is None else customer_words(chart, waiting, max_attempts=max_attempts, failed_at=failed_at)


def _at(moment: datetime | None) -> SafeString | str:
    """A clock time, to the minute, as a `<time>` the page's script shows in the viewer's zone
    (`static/zone.js`); UTC, named, without it. Empty without a time."""
    if moment is None:
        return ""
    utc = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}" data-minutes data-clock-only>{} UTC</time>', utc.isoformat(), f"{utc:%H:%M}"
    )


def customer_words(chart: Chart, waiting: ChartWaiting, *, max_attempts: int, failed_at: datetime | None) -> SafeString:
    """The reason as the portal tells the chart's org (never another org's chart or name), its times
    in the viewer's zone (`_at`).

    `failed_at`: when the last failed attempt ended (for `backoff`), if known.
    """
    until = _at(waiting.until)
    reason = waiting.reason
    if reason == WaitingReason.ORG_HELD:
        return mark_safe("Your organisation is on hold: its charts wait until it is released")  # constant words
    if reason == WaitingReason.CHART_PAUSED:
        return mark_safe("Paused: it waits until it is resumed")  # constant words
    if reason == WaitingReason.NOT_YET_PLANNED:
        return mark_safe("Its place in the queue is being worked out")  # constant words
    if reason == WaitingReason.BACKOFF:
        at = format_html(" at {}", _at(failed_at)) if failed_at else ""
        retry = format_html("Retrying after a failure{} (try {} of {})", at, chart.attempt + 1, max_attempts)
        return format_html("{}, not before {}", retry, until) if until else retry
    if reason == WaitingReason.PROVIDER_PAUSED:
        if until:
            return format_html("Waiting for the partner's rate limit until {}", until)
        return mark_safe("Waiting for the partner's rate limit")  # constant words
    about = format_html(", expected to start at about {}", until) if until else ""
    if reason == WaitingReason.ORG_CAP:
        return format_html("Your organisation is running as many charts at once as it may{}", about)
    if reason == WaitingReason.RETRY_BUDGET:
        return format_html("Waiting for room for retries in the shared pool{}", about)
    if reason == WaitingReason.BUDGET:
        return format_html("Waiting for capacity in the shared pool{}", about)
    return format_html("Waiting for its turn in the fair order{}", about)
