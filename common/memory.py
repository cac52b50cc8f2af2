"""Python's cyclic garbage collector, paused over work that builds many objects and no cycles."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pause:
    """How many blocks (of any thread: the collector is the process's) hold the collector paused, and
    whether it ran before the first of them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.was_enabled = False


_PAUSE = _Pause()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; reference counting still frees every object.

    A bulk of 10,000 charts allocates some 200,000 containers (the parsed body, the items, the rows,
    the charts, the answer). Every 700 allocations start a collection, and the full ones walk every
    object of the process, the application's modules included: a third of a bulk request's CPU
    (bench/bench_api.py). What such a block builds holds no cycle, so nothing waits for the collector;
    it runs again once the last block has left.
    """
    with _PAUSE.lock:
        if _PAUSE.holders == 0:
            _PAUSE.was_enabled = gc.isenabled()
            gc.disable()
        _PAUSE.holders += 1
    try:
        yield
    finally:
        with _PAUSE.lock:
            _PAUSE.holders -= 1
            if _PAUSE.holders == 0 and _PAUSE.was_enabled:
                gc.enable()
