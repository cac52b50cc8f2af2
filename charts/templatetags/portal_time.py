"""Times as the portal shows them: UTC, and relative to now ("in 4 min", "3 min ago")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from charts.models import IN_FLIGHT_STATES, TERMINAL_STATES, Chart
from charts.promise import AT_RISK, LATE, chart_promise
from charts.running import duration_words, overdue_words

register = template.Library()

# A band whose far end is this close is shown to the second: minutes away, "13:52-13:52" would say nothing.
SECONDS_WITHIN = timedelta(hours=1)
DASH = "\u2013"


def relative(at: datetime, now: datetime) -> str:
    """'in 40 s', 'in 4 min', 'in 2 h 5 min', 'in 3 days', or the same with 'ago' for the past; 'just now'
    within the second (an event just recorded is not 'in 0 s')."""
    seconds = round((at - now).total_seconds())
    if seconds == 0:
        return "just now"
    amount = duration_words(abs(seconds))
    return f"in {amount}" if seconds >= 0 else f"{amount} ago"


@register.simple_tag
def when(at: datetime | None) -> SafeString | str:
    """`<time>` with the UTC date and time to the second, then the relative time."""
    if at is None:
        return DASH
    utc = at.astimezone(UTC)
    return format_html(
        '<time datetime="{}">{} UTC</time> <span class="relative">({})</span>',
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        relative(utc, timezone.now()),
    )


@register.simple_tag
def finish_when(at: datetime | None) -> SafeString | str:
    """A running chart's ETA as `when` shows it, never in the past: an ETA the clock has passed (the
    next replan has not yet moved it) is 'any moment now'; the page's script keeps it so
    (`data-not-past`, static/portal/times.js)."""
    if at is None:
        return DASH
    now = timezone.now()
    utc = at.astimezone(UTC)
    if utc <= now:
        return format_html(
            '<time datetime="{}" data-not-past>{}</time> <span class="relative"></span>', utc.isoformat(), ANY_MOMENT
        )
    return format_html(
        '<time datetime="{}" data-not-past>{} UTC</time> <span class="relative">({})</span>',
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        relative(utc, now),
    )


ANY_MOMENT = "any moment now"


@register.simple_tag
def band(low: datetime | None, high: datetime | None) -> str:
    """'13:52-14:10 UTC' (an en dash), to the second ('13:52:05-13:52:40 UTC') when the band ends within the hour,
    with the date when it spans days; empty without a band."""
    if low is None or high is None:
        return ""
    low, high = low.astimezone(UTC), high.astimezone(UTC)
    shape = "%H:%M:%S" if high - timezone.now() < SECONDS_WITHIN else "%H:%M"
    if low.date() != high.date():
        shape = f"%Y-%m-%d {shape}"
    return f"{low.strftime(shape)}{DASH}{high.strftime(shape)} UTC"


@register.simple_tag
def overdue(chart: Chart) -> str:
    """'Running longer than usual (...)' for an in-flight chart past its expected duration, else ''."""
    return overdue_words(chart, now=timezone.now())


@register.simple_tag
def eta_when(chart: Chart) -> SafeString | str:
    """A chart's ETA: `finish_when` for a chart in flight (never in the past), else `when`."""
    return finish_when(chart.eta) if chart.state in IN_FLIGHT_STATES else when(chart.eta)  # type: ignore[attr-defined]


@register.simple_tag
def promise(chart: Chart) -> SafeString | str:
    """Whether a chart with a due time keeps it (`charts.promise`), in words, with its due time as
    `when` shows it: 'On track: due 2026-12-03 14:00:00 UTC (in 3 h)', 'At risk: due ... (in 40 min),
    likely to finish after it', 'Late: was due ... (2 h ago)', and for a finished chart whether it
    finished before or after it; '' without a due time."""
    verdict = chart_promise(chart, now=timezone.now())
    if verdict is None or chart.due_at is None:
        return ""
    finished = chart.state in TERMINAL_STATES and chart.finished_at is not None
    was = "was due" if finished or verdict == LATE else "due"
    if finished and chart.finished_at is not None:
        gap = duration_words(abs((chart.finished_at - chart.due_at).total_seconds()))
        tail = f", finished {gap} {'after' if chart.finished_at > chart.due_at else 'before'} it"
    elif verdict == AT_RISK:
        tail = ", likely to finish after it"
    else:
        tail = ""
    return format_html(
        '<span class="promise promise-{}">{}</span>: {} {}{}',
        verdict.replace(" ", "-"),
        verdict.capitalize(),
        was,
        when(chart.due_at),
        tail,
    )
