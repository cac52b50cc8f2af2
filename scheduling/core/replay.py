"""Dispatch by cost budget, and the replay of it that gives the ETAs.

The dispatch rule is written once, in `Dispatcher.walk`. The live dispatcher reaches it through
`dispatch_walk`; the event replay calls the same `walk` at every decision instant. The lane
simulation is the closed form the contract gives for the case without caps, availability or retry
budget; the tests check that it agrees with the event replay there.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

from .model import OrgPolicy, QueuedChart, RunningChart
from .order import DEFAULT_POLICY, org_codes

# The walk's verdict on a chart (`Dispatcher.last_verdict`).
STOP: Final = 0
START: Final = 1
SKIP_UNAVAILABLE: Final = 2
SKIP_CAPPED: Final = 3
SKIP_RETRY: Final = 4


class Dispatcher:
    """What runs at an instant, and the walk that decides what starts next.

    Charts are numbered 0..n-1. For chart i, `org[i]` is its org's code, `units[i]` the units
    c = min(cost, budget) it occupies while it runs, `available_at[i]` when it may start (None:
    already) and `retry[i]` whether it is a retry. The walk reads these sequences as they are at
    the time, so a caller may extend them as it goes. `caps[o]` is org o's `max_concurrency`.

    State: `free_budget` (below 0 while running charts hold more than a lowered budget),
    `org_running[o]` (charts of org o running), `retry_free` (retry units left; None without a
    retry budget), and `last_verdict`, the walk's verdict on the last chart it looked at.
    """

    __slots__ = (
        "available_at",
        "caps",
        "free_budget",
        "last_verdict",
        "org",
        "org_running",
        "retry",
        "retry_free",
        "units",
    )

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
        self.last_verdict = STOP

    def occupy(self, org: int, units: int, retry: bool) -> None:
        """Count a chart of `org` that starts (or already runs) holding `units`."""
        self.free_budget -= units
        self.org_running[org] += 1
        if retry and self.retry_free is not None:
            self.retry_free -= units

    def walk(self, candidates: Iterable[int], instant: float) -> list[int]:
        """Start charts at `instant`, visiting `candidates` (charts not yet started) in order;
        return the ones started.

        For each candidate chart, its verdict (kept in `last_verdict` for the caller) is:
        1. not available before `instant` (`available_at` later): skipped;
        2. its org already runs `max_concurrency` charts: skipped;
        3. a retry whose units exceed the free retry budget: skipped;
        4. its units exceed the free budget: the walk stops (head of line);
        5. otherwise it starts: the budget, its org's count and the retry budget are taken.
        The state is kept current as the walk goes, for the caller and for `candidates`.
        """
        started: list[int] = []
        available_at, org_of, units_of, retry_of = (
            self.available_at,
            self.org,
            self.units,
            self.retry,
        )
        caps, org_running, retry_free = self.caps, self.org_running, self.retry_free
        for chart in candidates:
            ready_at = available_at[chart]
            if ready_at is not None and ready_at > instant:
                self.last_verdict = SKIP_UNAVAILABLE
                continue
            org = org_of[chart]
            cap = caps[org]
            if cap is not None and org_running[org] >= cap:
                self.last_verdict = SKIP_CAPPED
                continue
            units = units_of[chart]
            retry = retry_of[chart]
            if retry and retry_free is not None and units > retry_free:
                self.last_verdict = SKIP_RETRY
                continue
            if units > self.free_budget:
                self.last_verdict = STOP
                break
            self.last_verdict = START
            # `occupy`, inlined: this loop is the hot path of the event replay.
            self.free_budget -= units
            org_running[org] += 1
            if retry and retry_free is not None:
                retry_free -= units
                self.retry_free = retry_free
            started.append(chart)
        return started


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
    2. Walk `order` once from the head (`Dispatcher.walk`).
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
    return [order[index] for index in dispatcher.walk(range(len(order)), now)]


def lane_replay(
    *,
    now: float,
    budget: int,
    running_finish: Sequence[float],
    running_units: Sequence[int],
    units: Sequence[int],
    avg: Sequence[float],
) -> tuple[list[float], list[float]]:
    """The start and ETA of each chart of the order when no cap, availability or retry budget
    applies.

    1. Seed the lanes: each running chart holds its units until it finishes; when the running
       charts hold more than the budget, the earliest-freed units above the budget free nothing
       (they are dropped); the rest of the budget is free at `now`.
    2. For each chart in order, a chart of c units starts when the c-th earliest lane frees:
       take the c earliest lanes; the last one taken is the start; they are busy until the
       chart's ETA, start + avg.
    """
    release_times = sorted(
        finish for finish, held in zip(running_finish, running_units, strict=True) for _ in range(held)
    )
    lanes = release_times[max(0, len(release_times) - budget) :]
    lanes += [now] * (budget - len(lanes))
    heapq.heapify(lanes)
    starts: list[float] = []
    etas: list[float] = []
    record_start, record_eta = starts.append, etas.append
    take_and_hold = heapq.heapreplace
    for chart_units, chart_avg in zip(units, avg, strict=True):
        if chart_units == 1:
            start = lanes[0]
            eta = start + chart_avg
            take_and_hold(lanes, eta)
        else:
            for _ in range(chart_units):
                start = heapq.heappop(lanes)
            eta = start + chart_avg
            for _ in range(chart_units):
                heapq.heappush(lanes, eta)
        record_start(start)
        record_eta(eta)
    return starts, etas


IDLE: Final = 0
ACTIVE: Final = 1
PARKED: Final = 2
NO_CHART: Final = -1


class EventReplay:
    """The exact replay of the dispatcher from instant to instant, for any scenario.

    Decision instants are `now`, every finish and every `available_at` still ahead; at each one
    the finishes due are counted, then `Dispatcher.walk` runs. A naive replay walks the whole
    order at every instant; this one offers the walk only charts it can act on. The charts are
    split into streams: one per org, and with a retry budget one per (org, units) for the org's
    retries. Whatever the walk does to a stream's head it would do to every chart of the stream
    (same org and cap, and for retries the same units), so a stream whose head is skipped is
    parked whole until its org's running count drops (cap) or retry units free up.

    A stream holds its available charts in order: those available from the start in a list read
    from `next_ready` on, those that became available later in a heap (`late`). It is IDLE (no
    available chart), ACTIVE (its head is in `heads`, the heap the walk draws from) or PARKED.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        now: float,
        avg: Sequence[float],
        org_count: int,
        running_finish: Sequence[float],
        running_org: Sequence[int],
        running_units: Sequence[int],
        running_retry: Sequence[bool],
    ) -> None:
        self.dispatcher = dispatcher
        self.now = now
        self.avg = avg
        self.running = list(zip(running_org, running_units, running_retry, strict=True))
        self.running_finish = running_finish
        self.stream_of, self.stream_org, self.stream_units = self._streams(org_count)
        stream_count = len(self.stream_org)
        self.ready: list[list[int]] = [[] for _ in range(stream_count)]
        self.next_ready = [0] * stream_count
        self.late: list[list[int]] = [[] for _ in range(stream_count)]
        self.head = [NO_CHART] * stream_count
        self.state = [IDLE] * stream_count
        self.heads: list[tuple[int, int]] = []
        self.parked_by_org: list[list[int]] = [[] for _ in range(org_count)]
        self.parked_for_retry: list[int] = []

    def _streams(self, org_count: int) -> tuple[list[int], list[int], list[int]]:
        """The stream of each chart, and the org and retry units of each stream."""
        dispatcher = self.dispatcher
        stream_of = list(dispatcher.org)
        stream_org = list(range(org_count))
        stream_units = [0] * org_count
        if dispatcher.retry_free is None:
            return stream_of, stream_org, stream_units
        retry_streams: dict[tuple[int, int], int] = {}
        for chart, retry in enumerate(dispatcher.retry):
            if retry:
                key = (dispatcher.org[chart], dispatcher.units[chart])
                if key not in retry_streams:
                    retry_streams[key] = len(stream_org)
                    stream_org.append(key[0])
                    stream_units.append(key[1])
                stream_of[chart] = retry_streams[key]
        return stream_of, stream_org, stream_units

    def run(self) -> tuple[list[float | None], list[float | None]]:
        """The start and ETA of every chart (None for one that can never start).

        1. Running charts occupy the pool; their finishes, and the charts still to become
           available, are the events ahead; the other charts fill their streams.
        2. At each instant: count the finishes due (freeing budget, caps and retry units, and
           unparking the streams they unblock), let the charts due become available, then walk.
        3. A started chart's finish (start + avg) is a new event; move to the earliest event.
        """
        dispatcher, now, avg = self.dispatcher, self.now, self.avg
        starts: list[float | None] = [None] * len(dispatcher.org)
        etas: list[float | None] = [None] * len(dispatcher.org)
        finishes: list[tuple[float, int]] = []
        for index, (org, units, retry) in enumerate(self.running):
            dispatcher.occupy(org, units, retry)
            finishes.append((self.running_finish[index], -1 - index))
        heapq.heapify(finishes)
        pending: list[tuple[float, int]] = []
        for chart, ready_at in enumerate(dispatcher.available_at):
            if ready_at is not None and ready_at > now:
                pending.append((ready_at, chart))
            else:
                self.ready[self.stream_of[chart]].append(chart)
        pending.sort()
        pending.append((math.inf, NO_CHART))
        for stream, charts in enumerate(self.ready):
            if charts:
                self.head[stream] = charts[0]
                self._activate(stream)
        next_pending = 0
        next_ready_at = pending[0][0]
        walk, candidates, finish = dispatcher.walk, self._candidates, self._finish
        pop, push = heapq.heappop, heapq.heappush
        instant = now
        while True:
            while finishes and finishes[0][0] <= instant:
                finish(pop(finishes)[1])
            while next_ready_at <= instant:
                self._arrive(pending[next_pending][1])
                next_pending += 1
                next_ready_at = pending[next_pending][0]
            for chart in walk(candidates(), instant):
                starts[chart] = instant
                etas[chart] = eta = instant + avg[chart]
                push(finishes, (eta, chart))
            if finishes:
                instant = finishes[0][0]
                if next_ready_at < instant:
                    instant = next_ready_at
            elif next_pending < len(pending) - 1:
                instant = next_ready_at
            else:
                return starts, etas

    def _activate(self, stream: int) -> None:
        self.state[stream] = ACTIVE
        heapq.heappush(self.heads, (self.head[stream], stream))

    def _arrive(self, chart: int) -> None:
        """Chart `chart` becomes available: it joins its stream, maybe as its new head."""
        stream = self.stream_of[chart]
        heapq.heappush(self.late[stream], chart)
        head = self.head[stream]
        if head == NO_CHART or chart < head:
            self.head[stream] = chart
            if self.state[stream] != PARKED:
                self._activate(stream)

    def _finish(self, key: int) -> None:
        """A chart finishes (key: its number, or -1 - i for running chart i): it gives back its
        budget, its org's slot and its retry units (the reverse of `Dispatcher.occupy`), and the
        streams it unblocks are unparked."""
        dispatcher = self.dispatcher
        if key >= 0:
            org, units, retry = dispatcher.org[key], dispatcher.units[key], dispatcher.retry[key]
        else:
            org, units, retry = self.running[-1 - key]
        dispatcher.free_budget += units
        org_running = dispatcher.org_running
        org_running[org] -= 1
        if retry and dispatcher.retry_free is not None:
            dispatcher.retry_free += units
        parked = self.parked_by_org[org]
        if parked:
            cap = dispatcher.caps[org]
            if cap is None or org_running[org] < cap:
                for stream in parked:
                    self._activate(stream)
                parked.clear()
        if retry and self.parked_for_retry and dispatcher.retry_free is not None:
            retry_free = dispatcher.retry_free
            still_parked = []
            for stream in self.parked_for_retry:
                if self.stream_units[stream] <= retry_free:
                    self._activate(stream)
                else:
                    still_parked.append(stream)
            self.parked_for_retry = still_parked

    def _candidates(self) -> Iterator[int]:
        """The heads of the active streams in order, for `Dispatcher.walk`.

        When the walk asks for the next candidate, the verdict on the last one is in
        `Dispatcher.last_verdict`: a skipped head parks its stream, a started one leaves it. Once
        no budget is left the candidates end, since the rest of the walk could start nothing.
        Entries of `heads` that no longer name an active stream's head are dropped.
        """
        heads, head, state = self.heads, self.head, self.state
        ready, next_ready, late = self.ready, self.next_ready, self.late
        dispatcher = self.dispatcher
        while heads:
            chart, stream = heads[0]
            if state[stream] != ACTIVE or head[stream] != chart:
                heapq.heappop(heads)
                continue
            yield chart
            verdict = dispatcher.last_verdict
            if verdict != START:
                # Streams hold only available charts: the verdict is SKIP_CAPPED or SKIP_RETRY.
                state[stream] = PARKED
                if verdict == SKIP_CAPPED:
                    self.parked_by_org[self.stream_org[stream]].append(stream)
                else:
                    self.parked_for_retry.append(stream)
                heapq.heappop(heads)
                continue
            charts, index, waiting = ready[stream], next_ready[stream], late[stream]
            if index < len(charts) and charts[index] == chart:
                index += 1
                next_ready[stream] = index
            else:
                heapq.heappop(waiting)
            new_head = charts[index] if index < len(charts) else NO_CHART
            if waiting and (new_head == NO_CHART or waiting[0] < new_head):
                new_head = waiting[0]
            head[stream] = new_head
            if new_head == NO_CHART:
                state[stream] = IDLE
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (new_head, stream))
            if dispatcher.free_budget <= 0:
                return
