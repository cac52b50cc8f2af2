"""The event replay without a retry budget (`reference.EventReplay`), compiled with numba: the path
`plan` takes for a large queue (see `replay.replay`), held to the reference by the parity matrix.

Its starts and ETAs are the reference's bit for bit: every start is an instant (`now`, a finish or
an `available_at`) and every ETA is start + avg on float64, as Python computes it on floats; so
`replay.replay` takes this path only when every time is a float (an integer scenario keeps its
integers). The kernel is compiled on its first call and cached on disk (numba's `cache=True`, in
`__pycache__` beside this file or the user's cache directory), so later processes only load it.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from numba import njit
from numpy.typing import NDArray

from ..order import Indices
from .reference import ACTIVE, IDLE, PARKED

NO_CHART: Final = np.iinfo(np.int64).max  # past every chart: an empty stream's head
NO_CAP: Final = -1


def compiled_replay(
    *,
    now: float,
    budget: int,
    caps: list[int | None],
    org: Indices,
    units: NDArray[np.int64],
    avg: NDArray[np.float64],
    later: Indices,
    later_at: NDArray[np.float64],
    running_finish: list[float],
    running_org: list[int],
    running_units: list[int],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The start and ETA of every chart of the order, nan for one that never starts.

    The inputs are `replay.ReplayInput`'s, as arrays: chart i of the order belongs to org `org[i]`, holds
    `units[i]` and lasts `avg[i]`; charts `later` become available at `later_at` (after `now`).
    Each is converted to the one dtype the kernel is compiled for, so a process compiles it once;
    the later charts are sorted by `available_at` here, by numpy (not compiled into the kernel:
    see `bench/bench_core.py`'s header).
    """
    arrival = np.argsort(later_at, kind="stable")
    return _replay(
        float(now),
        int(budget),
        np.array([NO_CAP if cap is None else cap for cap in caps], dtype=np.int64),
        np.asarray(org, dtype=np.int64),
        np.asarray(units, dtype=np.int64),
        np.asarray(avg, dtype=np.float64),
        np.asarray(later, dtype=np.int64)[arrival],
        np.asarray(later_at, dtype=np.float64)[arrival],
        np.array(running_finish, dtype=np.float64),
        np.array(running_org, dtype=np.int64),
        np.array(running_units, dtype=np.int64),
    )


@njit(cache=True)
def _replay(
    now: float,
    budget: int,
    caps: NDArray[np.int64],
    org: NDArray[np.int64],
    units: NDArray[np.int64],
    avg: NDArray[np.float64],
    later: NDArray[np.int64],
    later_at: NDArray[np.float64],
    running_finish: NDArray[np.float64],
    running_org: NDArray[np.int64],
    running_units: NDArray[np.int64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The event replay: `EventReplay.run`'s steps without a retry budget. `caps[o]` is `NO_CAP` for
    an org without one; the `later` charts come in order of `later_at`.

    Streams as the reference's, but the charts of every org without a cap are one stream, the line
    (number `org_count`), since the walk never skips them. A stream's charts available from the
    start are a run of `ready` (from `ready_begin[s]`, `next_ready[s]` of them taken, up to
    `ready_end[s]`); the ones that come later join a heap of its own (`late`, a slice per stream).
    `heads` is the heap of the ACTIVE streams' heads; `finish_at`/`finish_key` the heap of
    finishes: chart i of the order, or running chart j as key n + j.
    """
    chart_count = org.shape[0]
    org_count = caps.shape[0]
    line = org_count
    stream_count = org_count + 1
    starts = np.full(chart_count, np.nan)
    etas = np.full(chart_count, np.nan)

    stream_of = np.empty(chart_count, dtype=np.int64)
    for chart in range(chart_count):
        stream_of[chart] = org[chart] if caps[org[chart]] != NO_CAP else line
    available = np.ones(chart_count, dtype=np.bool_)
    for index in range(later.shape[0]):
        available[later[index]] = False
    ready_count = np.zeros(stream_count, dtype=np.int64)
    late_room = np.zeros(stream_count, dtype=np.int64)
    for chart in range(chart_count):
        if available[chart]:
            ready_count[stream_of[chart]] += 1
        else:
            late_room[stream_of[chart]] += 1
    ready_begin = np.zeros(stream_count, dtype=np.int64)
    late_begin = np.zeros(stream_count, dtype=np.int64)
    for stream in range(1, stream_count):
        ready_begin[stream] = ready_begin[stream - 1] + ready_count[stream - 1]
        late_begin[stream] = late_begin[stream - 1] + late_room[stream - 1]
    ready_end = np.empty(stream_count, dtype=np.int64)
    next_ready = np.empty(stream_count, dtype=np.int64)
    filled = np.empty(stream_count, dtype=np.int64)
    for stream in range(stream_count):
        ready_end[stream] = ready_begin[stream] + ready_count[stream]
        next_ready[stream] = filled[stream] = ready_begin[stream]
    ready = np.empty(chart_count, dtype=np.int64)
    for chart in range(chart_count):
        if available[chart]:
            ready[filled[stream_of[chart]]] = chart
            filled[stream_of[chart]] += 1
    late = np.empty(max(later.shape[0], 1), dtype=np.int64)
    late_size = np.zeros(stream_count, dtype=np.int64)

    free = budget
    org_running = np.zeros(org_count, dtype=np.int64)
    running_count = running_finish.shape[0]
    finish_at = np.empty(running_count + chart_count, dtype=np.float64)
    finish_key = np.empty(running_count + chart_count, dtype=np.int64)
    finish_count = 0
    for index in range(running_count):
        free -= running_units[index]
        org_running[running_org[index]] += 1
        finish_count = _push_finish(finish_at, finish_key, finish_count, running_finish[index], chart_count + index)

    head = np.full(stream_count, NO_CHART, dtype=np.int64)
    state = np.full(stream_count, IDLE, dtype=np.int64)
    heads = np.empty(stream_count + later.shape[0], dtype=np.int64)
    head_count = 0
    for stream in range(stream_count):
        if ready_count[stream]:
            head[stream] = ready[ready_begin[stream]]
            state[stream] = ACTIVE
            head_count = _push(heads, head_count, head[stream])
    next_arrival = 0
    arrival_count = later.shape[0]

    instant = now
    while True:
        while finish_count and finish_at[0] <= instant:
            key = finish_key[0]
            finish_count = _pop_finish(finish_at, finish_key, finish_count)
            if key < chart_count:
                finished_org, held = org[key], units[key]
            else:
                finished_org, held = running_org[key - chart_count], running_units[key - chart_count]
            free += held
            org_running[finished_org] -= 1
            if state[finished_org] == PARKED and org_running[finished_org] < caps[finished_org]:
                state[finished_org] = ACTIVE
                head_count = _push(heads, head_count, head[finished_org])
        while next_arrival < arrival_count and later_at[next_arrival] <= instant:
            chart = later[next_arrival]
            next_arrival += 1
            stream = stream_of[chart]
            begin = late_begin[stream]
            late_size[stream] = _push(late[begin : begin + late_room[stream]], late_size[stream], chart)
            if chart < head[stream]:
                head[stream] = chart
                if state[stream] != PARKED:
                    state[stream] = ACTIVE
                    head_count = _push(heads, head_count, chart)

        while head_count:
            chart = heads[0]
            stream = stream_of[chart]
            if state[stream] != ACTIVE or head[stream] != chart:
                head_count = _pop(heads, head_count)
                continue
            chart_org = org[chart]
            cap = caps[chart_org]
            if cap != NO_CAP and org_running[chart_org] >= cap:
                state[stream] = PARKED
                head_count = _pop(heads, head_count)
                continue
            held = units[chart]
            if held > free:
                break
            free -= held
            org_running[chart_org] += 1
            starts[chart] = instant
            etas[chart] = eta = instant + avg[chart]
            finish_count = _push_finish(finish_at, finish_key, finish_count, eta, chart)
            begin = late_begin[stream]
            if next_ready[stream] < ready_end[stream] and ready[next_ready[stream]] == chart:
                next_ready[stream] += 1
            else:
                late_size[stream] = _pop(late[begin : begin + late_room[stream]], late_size[stream])
            new_head = ready[next_ready[stream]] if next_ready[stream] < ready_end[stream] else NO_CHART
            if late_size[stream] and late[begin] < new_head:
                new_head = late[begin]
            head[stream] = new_head
            if new_head == NO_CHART:
                state[stream] = IDLE
                head_count = _pop(heads, head_count)
            else:
                _replace(heads, head_count, new_head)
            if free <= 0:
                break

        if finish_count:
            instant = finish_at[0]
            if next_arrival < arrival_count and later_at[next_arrival] < instant:
                instant = later_at[next_arrival]
        elif next_arrival < arrival_count:
            instant = later_at[next_arrival]
        else:
            return starts, etas


@njit(cache=True)
def _push(heap: NDArray[np.int64], size: int, value: int) -> int:
    """Add `value` to the min-heap heap[:size]; its new size."""
    position = size
    while position:
        parent = (position - 1) >> 1
        if heap[parent] <= value:
            break
        heap[position] = heap[parent]
        position = parent
    heap[position] = value
    return size + 1


@njit(cache=True)
def _replace(heap: NDArray[np.int64], size: int, value: int) -> None:
    """Take the least value off the min-heap heap[:size] and add `value` (size > 0)."""
    position = 0
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if value <= heap[child]:
            break
        heap[position] = heap[child]
        position = child
    heap[position] = value


@njit(cache=True)
def _pop(heap: NDArray[np.int64], size: int) -> int:
    """Take the least value off the min-heap heap[:size] (size > 0); its new size."""
    size -= 1
    if size:
        _replace(heap, size, heap[size])
    return size


@njit(cache=True)
def _push_finish(times: NDArray[np.float64], keys: NDArray[np.int64], size: int, time: float, key: int) -> int:
    """Add a finish to the min-heap of finishes (by time alone: finishes due at one instant are all
    counted before the walk, in any order); its new size."""
    position = size
    while position:
        parent = (position - 1) >> 1
        if times[parent] <= time:
            break
        times[position] = times[parent]
        keys[position] = keys[parent]
        position = parent
    times[position] = time
    keys[position] = key
    return size + 1


@njit(cache=True)
def _pop_finish(times: NDArray[np.float64], keys: NDArray[np.int64], size: int) -> int:
    """Take the earliest finish off the heap (size > 0); its new size."""
    size -= 1
    time, key = times[size], keys[size]
    position = 0
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and times[child + 1] < times[child]:
            child += 1
        if time <= times[child]:
            break
        times[position] = times[child]
        keys[position] = keys[child]
        position = child
    times[position] = time
    keys[position] = key
    return size
