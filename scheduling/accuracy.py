"""How good the ETAs were, measured on the charts that finish.

Every chart keeps two promises:
- at enqueue: the ETA and p10-p90 band of its first plan after its submission, and when that plan
  was made (its `ChartPromise`, written by `replan._record_first_plans`, once per chart);
- at start: the ETA and band of the plan its claim was made by (`dispatch._claim_row`, at each claim;
  the claim's `claimed_at` is the time of the prediction), so a retried chart is measured on the run
  that finished.
At its success (`reconcile._succeed`) each promise is scored by the core's rule
(`scheduling.core.accuracy.eta_outcome`): the error relative to the time that was left when it was
made, and whether the finish landed in the band. The scores are stored on the chart (the dashboard's
last hour, `scheduling.selectors.eta_accuracy`) and observed as metrics (`metrics.observe_eta_outcome`).
Charts that fail or are cancelled are not scored: the ETA promised a success.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from charts.models import Chart, ChartPromise
from scheduling.core.accuracy import Outcome, eta_outcome
from scheduling.snapshot import to_seconds

AT_ENQUEUE = "enqueue"
AT_START = "start"


def start_promise(chart: Chart) -> dict[str, datetime | None]:
    """The fields a claim records: the ETA and band of the chart's plan (joined in by the chart
    manager; a band the plan does not have is its ETA)."""
    eta = getattr(chart, "eta", None)
    return {
        "eta_at_start": eta,
        "eta_low_at_start": getattr(chart, "eta_low", None) or eta,
        "eta_high_at_start": getattr(chart, "eta_high", None) or eta,
    }


@dataclass(frozen=True)
class Promise:
    """An ETA and band a chart was given (`at`: AT_ENQUEUE or AT_START), and when."""

    at: str
    predicted_at: datetime
    eta: datetime
    low: datetime
    high: datetime


def chart_promises(chart: Chart) -> list[Promise]:
    """The promises the chart holds (none where its plan gave it no ETA). One query (its promise at
    enqueue)."""
    given: list[tuple[str, datetime | None, datetime | None, datetime | None, datetime | None]] = [
        (AT_START, chart.claimed_at, chart.eta_at_start, chart.eta_low_at_start, chart.eta_high_at_start)
    ]
    enqueue = ChartPromise.objects.filter(chart_id=chart.pk).first()
    if enqueue is not None:
        given.insert(0, (AT_ENQUEUE, enqueue.planned_at, enqueue.eta, enqueue.eta_low, enqueue.eta_high))
    return [
        Promise(at, predicted_at, eta, low or eta, high or eta)
        for at, predicted_at, eta, low, high in given
        if predicted_at is not None and eta is not None
    ]


def finish_scores(chart: Chart, *, finished: datetime) -> tuple[dict[str, Any], list[tuple[str, Outcome]]]:
    """Each of the chart's promises scored against its finish: the chart's fields to write
    (`eta_error_at_<at>`, `eta_in_band_at_<at>`) and the outcomes by `at`, for the metrics."""
    fields: dict[str, Any] = {}
    outcomes: list[tuple[str, Outcome]] = []
    for promise in chart_promises(chart):
        outcome = eta_outcome(
            predicted_at=to_seconds(promise.predicted_at),
            eta=to_seconds(promise.eta),
            low=to_seconds(promise.low),
            high=to_seconds(promise.high),
            finished=to_seconds(finished),
        )
        fields[f"eta_error_at_{promise.at}"] = outcome.error
        fields[f"eta_in_band_at_{promise.at}"] = outcome.in_band
        outcomes.append((promise.at, outcome))
    return fields, outcomes
