"""The event replay without a retry budget, in one loop: the path `plan` takes for caps and backoffs.

`replay.EventReplay` is the general replay (and the reference this one is tested against): it calls
`Dispatcher.walk` at every decision instant, through a generator of stream heads, and `_finish` for
every finish. In a saturated pool nearly every instant is one finish that frees room for one start,
so at a million charts those calls were the cost, not the work: a profile of `plan()` at 1M charts
with caps gave ~1M `walk` calls, ~2.4M generator resumptions and ~1M `_finish` calls, 60% of the
plan's time. Without a retry budget the walk's rule reduces to the org's cap and the free budget, so
this replay runs the same rule inline.

It never visits a capped org's charts one by one: an org whose head the walk meets at its cap is
parked whole (its head leaves the heap of heads) until one of its charts finishes. The charts of the
orgs without a cap, which the walk never skips, are one stream (the line), and between two events
that can change who comes first (a parked org's finish, an arrival) the line runs as the lane
simulation does: in a saturated pool most charts start with one heap replace on the finishes, which
are plain floats. A capped org's other finishes are no events: the slots they give back are counted
when the walk next meets the org's head (about half of the capped finishes at a million charts).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from itertools import accumulate, compress, repeat
from operator import is_not
from typing import Final, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .order import Indices

# Instants between the first two checks whether the tail is free of the budget; each check that
# finds it not doubles the wait, so that the checks cost little when the budget binds to the end.
TAIL_CHECK_EVERY: Final = 4096


def org_replay(
    *,
    now: float,
    budget: int,
    caps: Sequence[int | None],
    org: Indices,
    units: Sequence[int],
    avg: Sequence[float],
    pending: Sequence[tuple[float, int]],
    running_finish: Sequence[float],
    running_org: Sequence[int],
    running_units: Sequence[int],
) -> tuple[list[float | None], list[float | None]]:
    """The start and ETA of every chart of the order (None for one that never starts).

    Charts are numbered 0..n-1 in the fair order; chart i belongs to org `org[i]` (an array of org
    codes) and occupies `units[i]`; `pending` lists the charts that become available after `now`,
    as (available_at, chart) (see `later_charts`). `caps[o]` is org o's `max_concurrency`.

    The walk never skips a chart of an org without a cap, so those charts form one stream, the
    `line`: the ones available from the start in order (read from `next_in_line`; `none`, a number
    past every chart, ends it), the later ones in a heap `line_late`. Each capped org has a stream of
    its own: its charts available from the start in order (`ready[o]`, ended by `none`, `taken[o]`
    of them started), the later ones in a heap `late[o]`; `head[o]` is its first chart not started
    (`none`: none). `heads` is a heap of the heads of the capped orgs not parked (entries that are no
    longer their org's head are dropped when the walk meets them). The budget needs no chart's
    identity: the finishes are a heap of floats, one per chart running, and `dearer` holds by time
    the units beyond the first of the charts that hold more. A capped org's charts running are also
    in `slots[o]`, a heap of (finish, units); `room[o]`, how many more it may start, is brought up
    to date from it only when the walk meets the org's head.

    1. Running charts occupy their units and their capped org's slot; the charts available at
       `now` fill the streams, the others wait in `pending`, by (available_at, chart).
    2. At each instant that an arrival or a parked org's wake-up makes (and at `now`): count the
       finishes due (the budget back), unpark the orgs due (their heads back in `heads`), let the
       charts due join their streams. `barrier` is the next such instant.
    3. Until the barrier, walk: the first chart in order of the line and the heads (`limit`, the
       first head or late chart of the line) starts if the free budget holds it. A capped org whose
       head the walk meets at its cap (after counting its finishes due) is parked: its head leaves
       `heads`, and its earliest finish is a wake-up (`wakeups`), the only finish of a capped org
       that can change who comes first. An org that a start takes to its cap while its next chart
       is already behind the line (it lags) is parked at once. If the chart is dearer than the free
       budget (head of line), the next finish before the barrier is counted and the walk goes on
       at its time; with the pool full and a chart of one unit next in line, that is the lane
       simulation, one heap replace.
    4. Once every chart of the line has started, each capped org may be replayed on its own
       (`_tail_is_free`, `_replay_tail`). Stop when no event is left.
    """
    chart_count = len(org)
    org_count = len(caps)
    starts: list[float | None] = [None] * chart_count
    etas: list[float | None] = [None] * chart_count
    none = chart_count  # past every chart
    capped = [cap is not None for cap in caps]
    # Charts capped org o may still start before its cap (below 0 when it runs past a lowered cap),
    # as of the last time the walk met its head.
    room = [0 if cap is None else cap for cap in caps]
    free = budget
    finish_times: list[float] = [math.inf]
    dearer: dict[float, int] = {}
    slots: list[list[tuple[float, int]]] = [[(math.inf, 0)] for _ in range(org_count)]
    for finish_at, running_at, held in zip(running_finish, running_org, running_units, strict=True):
        free -= held
        finish_times.append(finish_at)
        if held > 1:
            dearer[finish_at] = dearer.get(finish_at, 0) + held - 1
        if capped[running_at]:
            room[running_at] -= 1
            slots[running_at].append((finish_at, held))
    heapq.heapify(finish_times)
    for running_slots in slots:
        heapq.heapify(running_slots)

    waiting_charts = sorted(pending)
    waiting_charts.append((math.inf, none))
    org_of = org.tolist()
    of_capped = np.array(capped, dtype=bool)[org] if org_count else np.zeros(0, dtype=bool)
    available = np.ones(chart_count, dtype=bool)
    available[[chart for _, chart in pending]] = False
    line = np.flatnonzero(available & ~of_capped).tolist()
    line.append(none)
    line_late: list[int] = []
    line_pending = int(np.count_nonzero(~available & ~of_capped))
    next_in_line = 0
    ready = _streams(org, available & of_capped, org_count, end=none)
    taken = [0] * org_count
    late: list[list[int]] = [[] for _ in range(org_count)]
    head = [charts[0] for charts in ready]
    parked = [False] * org_count
    wakeups: list[tuple[float, int]] = [(math.inf, -1)]  # (earliest finish, org) of each parked org
    heads = [chart for chart in head if chart != none]
    heapq.heapify(heads)
    instants_to_tail_check = 0
    tail_check_every = TAIL_CHECK_EVERY

    pop, push, replace = heapq.heappop, heapq.heappush, heapq.heapreplace
    next_pending = 0
    next_ready_at = waiting_charts[0][0]
    instant = now
    while True:
        while finish_times[0] <= instant:
            finish_at = pop(finish_times)
            free += 1
            if dearer and finish_at in dearer:
                free += dearer.pop(finish_at)
        while wakeups[0][0] <= instant:
            stream = pop(wakeups)[1]
            parked[stream] = False
            push(heads, head[stream])
        while next_ready_at <= instant:
            chart = waiting_charts[next_pending][1]
            stream = org_of[chart]
            if not capped[stream]:
                push(line_late, chart)
                line_pending -= 1
            else:
                push(late[stream], chart)
                if chart < head[stream]:
                    head[stream] = chart
                    if not parked[stream]:
                        push(heads, chart)
            next_pending += 1
            next_ready_at = waiting_charts[next_pending][0]
        barrier = wakeups[0][0]
        if next_ready_at < barrier:
            barrier = next_ready_at
        # The first chart in order besides the line's: a head (maybe one to drop) or a late chart.
        limit = heads[0] if heads else none
        if line_late and line_late[0] < limit:
            limit = line_late[0]

        while True:
            chart = line[next_in_line]
            if chart < limit:
                held = units[chart]
                if held <= free:
                    free -= held
                    starts[chart] = instant
                    etas[chart] = eta = instant + avg[chart]
                    push(finish_times, eta)
                    if held > 1:
                        dearer[eta] = dearer.get(eta, 0) + held - 1
                    next_in_line += 1
                    continue
                finish_at = finish_times[0]
                if finish_at >= barrier:
                    break
                if held == 1 and free == 0 and not (dearer and finish_at in dearer):
                    instant = finish_at
                    starts[chart] = instant
                    etas[chart] = eta = instant + avg[chart]
                    replace(finish_times, eta)
                    next_in_line += 1
                    continue
            elif limit == none:
                break
            else:
                chart = limit
                late_chart = bool(line_late) and line_late[0] == chart
                if not late_chart:
                    stream = org_of[chart]
                    running = slots[stream]
                    while running[0][0] <= instant:  # its slots come back as the walk meets it
                        pop(running)
                        room[stream] += 1
                    if head[stream] != chart or parked[stream] or room[stream] <= 0:
                        if head[stream] == chart and not parked[stream]:
                            # At its cap: the walk skips its charts until its next finish.
                            parked[stream] = True
                            wake_at = running[0][0]
                            push(wakeups, (wake_at, stream))
                            if wake_at < barrier:
                                barrier = wake_at
                        pop(heads)
                        limit = heads[0] if heads else none
                        if line_late and line_late[0] < limit:
                            limit = line_late[0]
                        continue
                held = units[chart]
                if held <= free:
                    # The start, as for a chart of the line above: written out in both places rather
                    # than a function, which would add a Python call to each of a million starts.
                    free -= held
                    starts[chart] = instant
                    etas[chart] = eta = instant + avg[chart]
                    push(finish_times, eta)
                    if held > 1:
                        dearer[eta] = dearer.get(eta, 0) + held - 1
                    if late_chart:
                        pop(line_late)
                    else:
                        room[stream] -= 1
                        push(running, (eta, held))
                        waiting = late[stream]
                        stream_charts = ready[stream]
                        if chart == stream_charts[taken[stream]]:
                            taken[stream] += 1
                            new_head = stream_charts[taken[stream]]
                        else:
                            pop(waiting)
                            new_head = stream_charts[taken[stream]]
                        if waiting and waiting[0] < new_head:
                            new_head = waiting[0]
                        head[stream] = new_head
                        if new_head == none:
                            pop(heads)
                        elif room[stream] <= 0 and new_head < line[next_in_line]:
                            # At its cap, its next chart already met: parked now rather than when
                            # the walk meets that chart.
                            parked[stream] = True
                            pop(heads)
                            wake_at = running[0][0]
                            push(wakeups, (wake_at, stream))
                            if wake_at < barrier:
                                barrier = wake_at
                        else:
                            replace(heads, new_head)
                    limit = heads[0] if heads else none
                    if line_late and line_late[0] < limit:
                        limit = line_late[0]
                    continue
            # Head of line: the chart waits; count the finishes before the barrier until it fits
            # (nothing else changes who comes first until then).
            while held > free and finish_times[0] < barrier:
                instant = finish_at = pop(finish_times)
                free += 1
                if dearer and finish_at in dearer:
                    free += dearer.pop(finish_at)
            if held > free:
                break

        if barrier == math.inf:
            return starts, etas
        if line[next_in_line] == none and not line_late and not line_pending:
            instants_to_tail_check -= 1
            if instants_to_tail_check <= 0:
                capped_running = [
                    (finish_at, stream, held)
                    for stream, running in enumerate(slots)
                    for finish_at, held in running
                    if instant < finish_at < math.inf
                ]
                other_held = budget - free - sum(held for _, _, held in capped_running)
                state = ReplayState(
                    instant, capped_running, other_held, ready, taken, late, waiting_charts[next_pending:-1]
                )
                if _tail_is_free(state, budget=budget, caps=caps, org=org_of, units=units):
                    _replay_tail(state, caps=caps, org=org_of, avg=avg, starts=starts, etas=etas)
                    return starts, etas
                tail_check_every *= 2
                instants_to_tail_check = tail_check_every
        instant = barrier


class ReplayState(NamedTuple):
    """Where the replay stands after the walk at `instant`: what runs (the charts of capped orgs as
    (finish, org, units), the units held by the others as one sum), and each org's charts left."""

    instant: float
    finishes: list[tuple[float, int, int]]
    other_held: int
    ready: list[list[int]]
    taken: list[int]
    late: list[list[int]]
    pending: list[tuple[float, int]]

    def charts_left(self, org_count: int, org: Sequence[int]) -> list[tuple[list[int], list[tuple[float, int]]]]:
        """Per org, its charts not started yet: those available, in order (a heap), and the ones to
        come as (available_at, chart), by time then chart."""
        left: list[tuple[list[int], list[tuple[float, int]]]] = []
        for stream in range(org_count):
            available = self.ready[stream][self.taken[stream] : -1]
            if self.late[stream]:
                available = sorted(available + self.late[stream])
            left.append((available, []))
        for ready_at, chart in self.pending:
            left[org[chart]][1].append((ready_at, chart))
        return left


def _tail_is_free(
    state: ReplayState,
    *,
    budget: int,
    caps: Sequence[int | None],
    org: Sequence[int],
    units: Sequence[int],
) -> bool:
    """Whether the budget can no longer stop or delay a start, every chart left being of a capped org.

    From now on an org with charts left holds at most what it holds now (it may run past a lowered
    cap) or `cap` charts of its dearest units (left or running), whichever is more: it starts a chart
    only while it runs fewer than `cap`. An org without charts left (every uncapped org among them,
    whose running charts hold `other_held`) only gives units back. When those bounds add up to at
    most the budget, no walk can meet a chart dearer than the free budget.
    """
    org_count = len(caps)
    held = [0] * org_count
    dearest = [0] * org_count
    for _, charts_org, charts_units in state.finishes:
        held[charts_org] += charts_units
        dearest[charts_org] = max(dearest[charts_org], charts_units)
    left = [False] * org_count
    for stream in range(org_count):
        charts = state.ready[stream][state.taken[stream] : -1] + state.late[stream]
        if charts:
            left[stream] = True
            dearest[stream] = max(dearest[stream], max(map(units.__getitem__, charts)))
    for _, chart in state.pending:
        left[org[chart]] = True
        dearest[org[chart]] = max(dearest[org[chart]], units[chart])
    bound = state.other_held
    for stream in range(org_count):
        cap = caps[stream]
        if not left[stream]:
            bound += held[stream]
        elif cap is None:
            return False
        else:
            bound += max(held[stream], cap * dearest[stream])
    return bound <= budget


def _replay_tail(
    state: ReplayState,
    *,
    caps: Sequence[int | None],
    org: Sequence[int],
    avg: Sequence[float],
    starts: list[float | None],
    etas: list[float | None],
) -> None:
    """The rest of the replay when the budget no longer binds (`_tail_is_free`): each org on its own.

    1. An org's slots: the latest `cap` finishes of its running charts, and `instant` for each
       slot left free.
    2. The slots are taken in the order they free: each starts the org's first chart (in order)
       available by then, at the later of the slot's time and the time that chart comes; a finish
       is a slot again. With a cap of 1 and every chart available, the starts are a running sum of
       the durations (`accumulate`).
    """
    org_count = len(caps)
    finish_times: list[list[float]] = [[] for _ in range(org_count)]
    for finish_at, charts_org, _ in state.finishes:
        finish_times[charts_org].append(finish_at)
    for stream, (available, later) in enumerate(state.charts_left(org_count, org)):
        if not available and not later:
            continue
        cap = caps[stream]
        assert cap is not None, "a tail holds capped orgs only"
        busy = sorted(finish_times[stream])[-cap:]
        slots = [*busy, *[state.instant] * (cap - len(busy))]
        heapq.heapify(slots)
        if cap == 1 and not later:
            times = list(accumulate(map(avg.__getitem__, available), initial=slots[0]))
            for chart, start, eta in zip(available, times, times[1:], strict=False):
                starts[chart], etas[chart] = start, eta
            continue
        _replay_org(slots, available, later, avg=avg, starts=starts, etas=etas)


def _replay_org(
    slots: list[float],
    available: list[int],
    later: Sequence[tuple[float, int]],
    *,
    avg: Sequence[float],
    starts: list[float | None],
    etas: list[float | None],
) -> None:
    """One org's charts on its own `slots` (a heap of the times they free): `available` (charts
    available now, in order) and `later` ((available_at, chart), by time then chart). A slot starts
    the first chart available by the later of its time and the previous start."""
    pop, push = heapq.heappop, heapq.heappush
    coming = 0
    previous = -math.inf
    while available or coming < len(later):
        instant = max(pop(slots), previous)
        if not available:
            instant = max(instant, later[coming][0])
        while coming < len(later) and later[coming][0] <= instant:
            push(available, later[coming][1])
            coming += 1
        chart = pop(available)
        starts[chart] = instant
        etas[chart] = eta = instant + avg[chart]
        push(slots, eta)
        previous = instant


def later_charts(available_at: Sequence[float | None], order: Indices, now: float) -> list[tuple[float, int]]:
    """(available_at, position in `order`) of each chart of the order available only after `now`.

    `available_at` is indexed by queue position; a chart outside the order is left out. Most
    charts have no `available_at`: they are passed over in C (`map(is_not, ...)`), not in a loop.
    """
    position = np.full(len(available_at), -1, dtype=np.intp)
    position[order] = np.arange(len(order), dtype=np.intp)
    marked = compress(range(len(available_at)), map(is_not, available_at, repeat(None)))
    return [
        (ready_at, int(position[chart]))
        for chart in marked
        if (ready_at := available_at[chart]) is not None and ready_at > now and position[chart] >= 0
    ]


def _streams(codes: Indices, member: NDArray[np.bool_], org_count: int, *, end: int) -> list[list[int]]:
    """Per org, its charts marked in `member`, in order and ended by `end` (a stable sort by org code,
    split)."""
    charts = np.flatnonzero(member)
    by_org = charts[np.argsort(codes[charts], kind="stable")]
    bounds = np.cumsum(np.bincount(codes[charts], minlength=org_count))
    return [[*part.tolist(), end] for part in np.split(by_org, bounds[:-1])] if org_count else []
