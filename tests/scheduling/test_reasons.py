"""The shell's reasons, skip counters and metric labels are the core's verdicts by name."""

from __future__ import annotations

import pytest

from charts.models import WaitingReason
from scheduling.core.dispatcher import START, UNAVAILABLE, Verdict
from scheduling.reasons import skip_reason, waiting_reason

WAITING_VERDICTS = [verdict for verdict in Verdict if verdict not in (START, UNAVAILABLE)]


@pytest.mark.parametrize("verdict", WAITING_VERDICTS)
def test_a_verdict_is_stored_under_its_own_name(verdict: Verdict) -> None:
    for provider_paused in (False, True):
        assert waiting_reason(verdict, provider_paused=provider_paused).value == verdict.value
        assert skip_reason(verdict, provider_paused=provider_paused) == verdict.value


def test_unavailable_is_told_apart_into_a_backoff_and_a_provider_pause() -> None:
    assert waiting_reason(UNAVAILABLE, provider_paused=False) is WaitingReason.BACKOFF
    assert waiting_reason(UNAVAILABLE, provider_paused=True) is WaitingReason.PROVIDER_PAUSED
    assert skip_reason(UNAVAILABLE, provider_paused=True) == "provider_paused"


def test_every_stored_reason_but_the_shells_own_comes_from_a_verdict() -> None:
    from_verdicts = {
        waiting_reason(verdict, provider_paused=paused)
        for verdict in Verdict
        if verdict is not START
        for paused in (False, True)
    }
    assert set(WaitingReason) - from_verdicts == {WaitingReason.NOT_YET_PLANNED}


def test_a_chart_that_starts_has_no_reason_to_wait() -> None:
    with pytest.raises(ValueError, match="does not wait"):
        waiting_reason(START, provider_paused=False)
