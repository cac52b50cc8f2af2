"""How good a promise was: a chart's finish against the ETA and band it was given.

Pure: times are seconds on one clock. The shell records each chart's ETA at enqueue and at its start
and applies this rule once at its finish (`scheduling.accuracy`); the metrics and the dashboard read
what it gave.
"""

from __future__ import annotations

from dataclasses import dataclass

# The shortest time left a prediction's error is measured against: a chart predicted a moment before
# it finished would otherwise weigh its few seconds of error as a huge ratio.
MIN_HORIZON = 1.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """`error`: |finish - eta| / (finish - predicted_at), the time left when it was predicted (at
    least MIN_HORIZON); `late`: the signed error (finish - eta, seconds; > 0: later than promised);
    `in_band`: eta_low <= finish <= eta_high."""

    error: float
    late: float
    in_band: bool


def eta_outcome(*, predicted_at: float, eta: float, low: float, high: float, finished: float) -> Outcome:
    """The outcome of one promise (see `Outcome`). A band without width (no spread known) holds only
    a finish at exactly its ETA."""
    horizon = max(MIN_HORIZON, finished - predicted_at)
    return Outcome(error=abs(finished - eta) / horizon, late=finished - eta, in_band=low <= finished <= high)
