"""A chart's state, its tries and its place in line in a customer's words (the portal's, and the API's
text): "Starting" rather than "Dispatching", "try 2 of 3" rather than "Attempt 1", "12th in line"
rather than "Position 11"."""

from __future__ import annotations

from charts.models import IN_FLIGHT_STATES, TERMINAL_STATES, Chart, ChartState

STATE_WORDS = {
    ChartState.QUEUED: "Queued",
    ChartState.PAUSED: "Paused",
    ChartState.DISPATCHING: "Starting",
    ChartState.RUNNING: "Running",
    ChartState.RETRY_WAIT: "Waiting to retry",
    ChartState.SUCCEEDED: "Succeeded",
    ChartState.FAILED: "Failed",
    ChartState.CANCELLED: "Cancelled",
}


def state_words(state: str) -> str:
    """A chart state as its org reads it."""
    return STATE_WORDS.get(ChartState(state), state) if state in ChartState.values else state


def ordinal(number: int) -> str:
    """'1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '112th'."""
    if number % 100 in (11, 12, 13):
        return f"{number}th"
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number % 10, 'th') }"


def place_words(position: int | None) -> str:
    """A 0-based place in the fair order in words: 'next', '2nd in line', ...; '' without a place."""
    if position is None:
        return ""
    return "next" if position == 0 else f"{ordinal(position + 1)} in line"


def tries_words(chart: Chart, *, max_attempts: int) -> str:
    """Which try a chart is on, in words.

    `Chart.attempt` counts the tries spent, the one in flight included: a chart in flight is on try
    `attempt`; one that waits has its try `attempt + 1` to come; a finished one used `attempt` tries.
    """
    if chart.state in IN_FLIGHT_STATES:
        return f"try {max(1, chart.attempt)} of {max_attempts}"
    if chart.state in TERMINAL_STATES:
        if chart.attempt == 0:
            return "never started"
        return f"{chart.attempt} {'try' if chart.attempt == 1 else 'tries'} of {max_attempts}"
    if chart.attempt == 0:
        return f"not started yet (up to {max_attempts} tries)"
    return f"try {chart.attempt + 1} of {max_attempts} to come"
