"""The scheduling core: fair order, budget dispatch and ETAs, in pure Python over plain data.

It implements `SCHEDULING.md` (the contract) and imports nothing from Django, Celery, Channels,
Temporal or the project's apps: the live system maps its snapshot to a `Scenario` and calls
`plan`, and its dispatcher calls `dispatch_walk`. `python -m scheduling.core plan FILE` runs the
same `plan` on a scenario JSON. The chart record is declared once, `model.QueuedChart` (each field's
`Column`: how it is checked and kept as a column); a chart's id is a string in the JSON and the
live system's integer key in a snapshot. To learn the walk, read `dispatcher.py`, then `replay`.

Extensions go beyond the contract; all are off by default and leave every contract plan as it is.

`OrgPolicy.served` (`orgs.NAME.served` in the JSON, a number >= 0): what the org was already given in
the rounds under way (see `OrgPolicy`), so that a lever takes effect from the next round.

The other: `Scenario.retry_budget`
(`retry_budget` in the JSON, an integer >= 0 or null). Charts marked `retry` (queued or running)
may then together occupy at most that many cost units (c = min(cost, budget) each). A retry chart
that would exceed it is skipped by the walk, like a capped org, not a stop; running retries above
it (after it was lowered) only pause further retries until they drain. A retry chart whose c
exceeds the retry budget can never start: its start and ETA are null. Without a retry budget the
`retry` marks change nothing.

Why each queued chart waits (`Plan.reason`, `Plan.waiting_until`, `Plan.head_of_line`; see
`waiting`): the verdicts (`dispatcher.Verdict`) of the walk at `now`, worked out on first use. Not
part of the plan command's output. The replays that give the starts and ETAs are behind one seam,
`replay`: the reference walk, and the fast ones held equal to it.

For the ETAs only (`forecast`; the order never depends on them): `Scenario.arrivals` (`arrivals` in
the JSON: `[{"org", "rate", "until", "avg", "cost", "spread"}]`), the charts orgs are expected to
submit, which the replay counts; `Scenario.spread` and `Scenario.running_spread` (a chart's `spread`
in the JSON), each chart's log-sigma of duration, as columns aligned with the queued and the running
charts; and `Scenario.history` (`history` in the JSON: `{"since", "decay", "submissions": [{"org",
"created", "avg", "cost", "spread", "count"}]}`), the submissions of the recent past from which the
core derives the arrivals it expects (`forecast.forecast`). From them `Plan.eta_low` / `eta_high`
give a p10-p90 band, which the plan command prints as `eta_low`, `eta_high`, `org_clear_low` and
`org_clear_high` when any of them is given.
"""

from .dispatcher import dispatch_walk
from .io import ScenarioError, parse_scenario, plan_to_json
from .model import (
    Aging,
    Arrival,
    ChartId,
    History,
    OrgPolicy,
    PastSubmission,
    Plan,
    QueueColumns,
    QueuedChart,
    RunningChart,
    Scenario,
    times_list,
)
from .order import fair_order
from .planner import plan
from .replay import load_compiled_replay

__all__ = [
    "Aging",
    "Arrival",
    "ChartId",
    "History",
    "OrgPolicy",
    "PastSubmission",
    "Plan",
    "QueueColumns",
    "QueuedChart",
    "RunningChart",
    "Scenario",
    "ScenarioError",
    "dispatch_walk",
    "fair_order",
    "load_compiled_replay",
    "parse_scenario",
    "plan",
    "plan_to_json",
    "times_list",
]
