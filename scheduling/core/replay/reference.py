"""The reference replay: the dispatcher's walk from instant to instant, for any scenario, written
once through the one dispatch rule, `Dispatcher.decide`. The fast replays (`lanes`, `compiled`) are
held equal to it; `plan` takes it wherever neither applies.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Final

from ..dispatcher import BUDGET, ORG_CAP, START, Dispatcher

# A stream's states (the compiled replay's too).
IDLE: Final = 0  # no chart of the stream is available
ACTIVE: Final = 1  # its head is in the heap of heads the walk draws from
PARKED: Final = 2  # skipped at its org's cap (or the retry budget) until a finish frees it
NO_CHART: Final = -1


class EventReplay:
    """The exact replay of the dispatcher from instant to instant, for any scenario.

    Decision instants are `now`, every finish and every `available_at` still ahead; at each one
    the finishes due are counted, then the walk decides charts in order (`Dispatcher.decide`). A
    naive replay walks the whole order at every instant; this one offers the walk only charts it
    can act on. The charts are split into streams: one per org, and with a retry budget one per
    (org, units) for the org's retries. Whatever the walk does to a stream's head it would do to
    every chart of the stream (same org and cap, and for retries the same units), so a stream whose
    head is skipped is parked whole until its org's running count drops (cap) or retry units free
    up.

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
        instant = now
        while True:
            while finishes and finishes[0][0] <= instant:
                self._finish(heapq.heappop(finishes)[1])
            while next_ready_at <= instant:
                self._arrive(pending[next_pending][1])
                next_pending += 1
                next_ready_at = pending[next_pending][0]
            for chart in self._walk(instant):
                starts[chart] = instant
                etas[chart] = eta = instant + avg[chart]
                heapq.heappush(finishes, (eta, chart))
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

    def _walk(self, instant: float) -> list[int]:
        """The walk at `instant` over the heads of the active streams, in order; the charts started.

        Each head gets its verdict from `Dispatcher.decide`: a skipped head parks its stream (streams
        hold only available charts, so the verdict is ORG_CAP or RETRY_BUDGET), BUDGET ends the walk,
        a started one makes way for its stream's next chart. Once no budget is left the walk ends,
        since the rest of it could start nothing. Entries of `heads` that no longer name an active
        stream's head are dropped.
        """
        heads, head, state = self.heads, self.head, self.state
        ready, next_ready, late = self.ready, self.next_ready, self.late
        dispatcher = self.dispatcher
        decide = dispatcher.decide
        started: list[int] = []
        while heads:
            chart, stream = heads[0]
            if state[stream] != ACTIVE or head[stream] != chart:
                heapq.heappop(heads)
                continue
            verdict = decide(chart, instant)
            if verdict is not START:
                if verdict is BUDGET:
                    break
                state[stream] = PARKED
                if verdict is ORG_CAP:
                    self.parked_by_org[self.stream_org[stream]].append(stream)
                else:
                    self.parked_for_retry.append(stream)
                heapq.heappop(heads)
                continue
            started.append(chart)
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
                break
        return started
