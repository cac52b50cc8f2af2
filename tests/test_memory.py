"""The cyclic collector paused over a block, and running again after it, whatever the block did."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from common.memory import collector_paused


@pytest.fixture
def collector_on() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def test_the_collector_is_off_inside_and_on_after(collector_on: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_runs_again_after_an_error(collector_on: None) -> None:
    with pytest.raises(ValueError, match="bad item"), collector_paused():
        raise ValueError("bad item")
    assert gc.isenabled()


def test_it_runs_again_only_when_the_last_of_overlapping_blocks_leaves(collector_on: None) -> None:
    entered, leave = threading.Event(), threading.Event()

    def other_request() -> None:
        with collector_paused():
            entered.set()
            leave.wait(5)

    thread = threading.Thread(target=other_request)
    with collector_paused():
        thread.start()
        assert entered.wait(5)
    assert not gc.isenabled()  # the other thread's block is still running
    leave.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()
