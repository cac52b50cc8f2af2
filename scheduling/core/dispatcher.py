"""The dispatch rule, written once: `Dispatcher.decide` gives a chart its verdict at an instant.

The live dispatcher (`scheduling.dispatch`) decides each chart with it as it pages through the queue;
the reference replay (`replay.reference.EventReplay`) decides its stream heads with it at every
decision instant, and the reasons why a chart waits (`waiting`) are the verdicts of `Dispatcher.walk`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from .model import OrgPolicy, QueuedChart, RunningChart
from .order import DEFAULT_POLICY, org_codes


class Verdict(StrEnum):
    """The walk's verdict on one chart, in the order the rule checks them; its value is the reason a
    waiting chart is given (`Plan.reason`), which the shell stores, counts and labels as it is.

    `Dispatcher.decide` gives UNAVAILABLE, ORG_CAP, RETRY_BUDGET, BUDGET (the head of the line: the
    walk stops there) or START. The fair order leaves out ORG_HELD and CHART_PAUSED charts, and a
    chart the walk never reached at `now` waits its TURN (or BUDGET, held behind the head).
    """

    ORG_HELD = "org_held"  # its org's weight is 0: not in the order
    CHART_PAUSED = "chart_paused"  # paused: not in the order
    UNAVAILABLE = "unavailable"  # `available_at` later (a backoff or a paused provider: the shell knows which)
    ORG_CAP = "org_cap"  # its org already runs `max_concurrency` charts
    RETRY_BUDGET = "retry_budget"  # a retry whose units exceed the free retry budget
    BUDGET = "budget"  # its units exceed the free budget: the walk stops here (head of line)
    TURN = "turn"  # charts ahead of it in the fair order come first
    START = "start"  # it starts


ORG_HELD, CHART_PAUSED, UNAVAILABLE, ORG_CAP, RETRY_BUDGET, BUDGET, TURN, START = Verdict


class Dispatcher:
    """What runs at an instant, and the rule that decides what starts next.

    Charts are numbered 0..n-1. For chart i, `org[i]` is its org's code, `units[i]` the units
    c = min(cost, budget) it occupies while it runs, `available_at[i]` when it may start (None:
    already) and `retry[i]` whether it is a retry. The rule reads these sequences as they are at
    the time, so a caller may extend them as it goes. `caps[o]` is org o's `max_concurrency`.

    State: `free_budget` (below 0 while running charts hold more than a lowered budget),
    `org_running[o]` (charts of org o running) and `retry_free` (retry units left; None without a
    retry budget).
    """

    __slots__ = ("available_at", "caps", "free_budget", "org", "org_running", "retry", "retry_free", "units")

    def __init__(
        self,
        *,
        budget: int,
        caps: Sequence[int | None],
        org: Sequence[int],
        units: Sequence[int],
        available_at: Sequence[float | None],
        retry: Sequence[bool],
        retry_budget: int | None,
    ) -> None:
        self.caps = caps
        self.org = org
        self.units = units
        self.available_at = available_at
        self.retry = retry
        self.free_budget = budget
        self.org_running = [0] * len(caps)
        self.retry_free = retry_budget

    def occupy(self, org: int, units: int, retry: bool) -> None:
        """Count a chart of `org` that starts (or already runs) holding `units`."""
        self.free_budget -= units
        self.org_running[org] += 1
        if retry and self.retry_free is not None:
            self.retry_free -= units

    def decide(self, chart: int, instant: float) -> Verdict:
        """The verdict on `chart` (not yet started) at `instant`; a chart that starts is counted.

        1. not available before `instant` (`available_at` later): UNAVAILABLE;
        2. its org already runs `max_concurrency` charts: ORG_CAP;
        3. a retry whose units exceed the free retry budget: RETRY_BUDGET;
        4. its units exceed the free budget: BUDGET (the walk goes no further: head of line);
        5. otherwise START: the budget, its org's count and the retry budget are taken.
        """
        ready_at = self.available_at[chart]
        if ready_at is not None and ready_at > instant:
            return UNAVAILABLE
        org = self.org[chart]
        cap = self.caps[org]
        if cap is not None and self.org_running[org] >= cap:
            return ORG_CAP
        units = self.units[chart]
        retry = self.retry[chart]
        if retry and self.retry_free is not None and units > self.retry_free:
            return RETRY_BUDGET
        if units > self.free_budget:
            return BUDGET
        self.occupy(org, units, retry)
        return START

    def walk(self, candidates: Iterable[int], instant: float) -> list[tuple[int, Verdict]]:
        """Decide `candidates` (charts not yet started) in order at `instant`, until one is BUDGET (the
        head of the line); return each chart visited with its verdict (the last one BUDGET when the
        walk stopped)."""
        verdicts: list[tuple[int, Verdict]] = []
        for chart in candidates:
            verdict = self.decide(chart, instant)
            verdicts.append((chart, verdict))
            if verdict is BUDGET:
                break
        return verdicts


def dispatch_walk(
    order: Sequence[QueuedChart],
    *,
    now: float,
    budget: int,
    running: Sequence[RunningChart],
    orgs: Mapping[str, OrgPolicy],
    retry_budget: int | None = None,
) -> list[QueuedChart]:
    """The charts of `order` to start at `now`, given the charts in `running`.

    `order` is the fair order of the charts not yet started (as `fair_order` gives it).
    1. Count every running chart as occupying its units, its org's slot and its retry units.
    2. Walk `order` once from the head (`Dispatcher.walk`); keep the charts that START.
    """
    org_code, org_names = org_codes([*(chart.org for chart in order), *(chart.org for chart in running)])
    dispatcher = Dispatcher(
        budget=budget,
        caps=[orgs.get(name, DEFAULT_POLICY).max_concurrency for name in org_names],
        org=org_code,
        units=[min(chart.cost, budget) for chart in order],
        available_at=[chart.available_at for chart in order],
        retry=[chart.retry for chart in order],
        retry_budget=retry_budget,
    )
    for index, chart in enumerate(running, start=len(order)):
        dispatcher.occupy(org_code[index], min(chart.cost, budget), chart.retry)
    return [order[index] for index, verdict in dispatcher.walk(range(len(order)), now) if verdict is START]
