"""The scheduling core: fair order, budget dispatch and ETAs, in pure Python over plain data.

It implements `SCHEDULING.md` (the contract) and imports nothing from Django, Celery, Channels,
Temporal or the project's apps: the live system maps its snapshot to a `Scenario` and calls `plan`,
and its dispatcher decides each chart by the one rule, `dispatcher.Dispatcher.decide`.
`python -m scheduling.core plan FILE` runs the same `plan` on a scenario JSON.

To learn the walk, read `dispatcher.py` (the rule and its verdicts), then `replay/reference.py` (the
walk from instant to instant), `replay/__init__.py` (which replay a plan takes) and `waiting.py` (why
a chart waits: the walk at `now`); `order.py` gives the order the walk reads, `planner.py` ties them.

The extensions beyond the contract are off by default and leave every contract plan as it is; each
is described where `model.py` declares it: an org's `served`, the `retry_budget`, a chart's `due`
and `due_first`, and for the ETAs only the `arrivals`, `spread` and `history` (see `forecast`).
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
