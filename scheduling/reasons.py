"""The shell's names for the core's verdicts (`scheduling.core.dispatcher.Verdict`).

A verdict's value is the reason stored with a chart's plan (`charts.models.WaitingReason`), the
dispatcher's skip counter and the metrics' `reason` label, with one refinement the shell alone can
make: UNAVAILABLE is told apart into `provider_paused` (a provider's pause holds the chart past its
own backoff) and `backoff`.
"""

from __future__ import annotations

from charts.models import WaitingReason
from scheduling.core.dispatcher import START, UNAVAILABLE, Verdict


def waiting_reason(verdict: Verdict, *, provider_paused: bool) -> WaitingReason:
    """Why a chart with `verdict` waits (`provider_paused`: a provider's pause holds it, not only its
    own backoff). START is no reason to wait."""
    if verdict is START:
        raise ValueError("a chart that starts does not wait")
    if verdict is UNAVAILABLE:
        return WaitingReason.PROVIDER_PAUSED if provider_paused else WaitingReason.BACKOFF
    return WaitingReason(verdict.value)


def skip_reason(verdict: Verdict, *, provider_paused: bool) -> str:
    """The label the dispatcher counts a skipped chart under: its waiting reason's value, so that the
    skip counters and the waiting gauge read alike."""
    return waiting_reason(verdict, provider_paused=provider_paused).value
