"""Why each waiting chart is not running now, and until when: the verdicts of the walk at `now`.

The replay that gives the ETAs walks the order at `now` first (`Dispatcher.decide`, or its fast
forms in `replay.lanes` and `replay.compiled`). Its outcome at `now` (which charts start, and so the free budget,
each org's running count and the free retry units after the walk) gives every chart of the order the
verdict the walk gives it, or would give it had it not stopped at the head of the line. This step
reads that outcome in whole columns (numpy), not chart by chart: no second walk of the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from .dispatcher import BUDGET, CHART_PAUSED, ORG_CAP, ORG_HELD, RETRY_BUDGET, START, TURN, UNAVAILABLE, Verdict
from .order import Indices

# Codes of the verdicts in the columns; NOT_WAITING (START) for a chart the walk starts at `now`.
REASONS: Final = tuple(verdict for verdict in Verdict if verdict is not START)
NOT_WAITING: Final = len(REASONS)
_NAMES: Final = np.array([*(reason.value for reason in REASONS), None], dtype=object)
_CODE: Final = {reason: code for code, reason in enumerate(REASONS)}


@dataclass(frozen=True, slots=True)
class Waiting:
    """The reasons of the charts of the order, by position in it.

    `code[i]`: chart i's reason (an index into `REASONS`, or NOT_WAITING). `until[i]`: when it lifts
    as far as the plan knows (nan: not known): for UNAVAILABLE the chart's `available_at`; for
    every other reason the chart's predicted start (the replay's), nan for a chart that never
    starts. `head`: the chart at the head of the line (-1: none); `behind_head[i]`: chart i is
    BUDGET because it waits behind that head, not as the head itself.
    """

    code: NDArray[np.int8]
    until: NDArray[np.float64]
    head: int
    behind_head: NDArray[np.bool_]

    def names(self) -> list[str | None]:
        """Each chart's reason as its `Verdict` value (None: the walk starts it now)."""
        return reason_names(self.code)


def reason_names(code: NDArray[np.int8]) -> list[str | None]:
    """The `Verdict` value of each code (None for NOT_WAITING)."""
    return _NAMES[code].tolist()  # type: ignore[no-any-return]


def waiting_reasons(
    *,
    now: float,
    budget: int,
    start: Sequence[float | None] | NDArray[np.float64],
    org: Indices,
    units: NDArray[np.int64],
    caps: Sequence[int | None],
    later: Indices,
    later_at: NDArray[np.float64],
    retry: NDArray[np.bool_] | None,
    retry_budget: int | None,
    running_finish: Sequence[float],
    running_org: Sequence[int],
    running_units: Sequence[int],
    running_retry: Sequence[bool],
) -> Waiting:
    """The reason of each chart of the order (numbered 0..n-1 in it), from the replay's `start` of
    each (None or nan: it never starts).

    `later` lists the charts available only after `now`, `later_at` when; `retry` marks the retries
    (None: no chart of the order is a retry under `retry_budget`).
    1. After the walk at `now`: what runs is every running chart not finished by `now` and every
       chart whose start is `now`. That gives the free budget, each org's running count and the
       free retry units after the walk.
    2. What each chart met when the walk reached it: the state after the walk, minus what the charts
       started after it in the order took (`_met_by_position`); past the last start, the state after
       the walk itself.
    3. Each chart not started now gets the first check of the rule it fails, against what it met:
       UNAVAILABLE (later `available_at`), ORG_CAP (its org at its cap), RETRY_BUDGET (a retry past
       the free retry units).
    4. The first chart left is the head of the line, where the walk stopped: BUDGET. After it, a
       chart the free budget would hold is BUDGET (held behind the head), any other TURN.
    5. `until`: `available_at` for UNAVAILABLE, else the predicted start (none for a chart that
       starts now).
    """
    start = np.asarray(start, dtype=np.float64)  # None (never starts) becomes nan
    count = len(start)
    started_now = start == now
    running_on = np.asarray(running_finish, dtype=np.float64) > now
    running_code = np.asarray(running_org, dtype=np.intp)[running_on]
    running_held = np.asarray(running_units, dtype=np.int64)[running_on]
    free = budget - int(running_held.sum()) - int(units[started_now].sum())
    org_running = np.bincount(running_code, minlength=len(caps)) + np.bincount(org[started_now], minlength=len(caps))
    cap = np.array([np.inf if limit is None else limit for limit in caps], dtype=np.float64)

    org_met, retry_taken_after = _met_by_position(started_now, org, units, retry)

    code = np.full(count, _CODE[TURN], dtype=np.int8)
    until = start.copy()
    if retry is not None and retry_budget is not None:
        running_retry_held = running_held[np.asarray(running_retry, dtype=np.bool_)[running_on]]
        retry_free = retry_budget - int(running_retry_held.sum()) - int(units[started_now & retry].sum())
        code[retry & (units > retry_free + retry_taken_after)] = _CODE[RETRY_BUDGET]
    code[org_running[org] - org_met >= cap[org]] = _CODE[ORG_CAP]
    code[later] = _CODE[UNAVAILABLE]
    until[later] = later_at
    code[started_now] = NOT_WAITING
    until[started_now] = np.nan

    in_line = code == _CODE[TURN]
    head = int(np.argmax(in_line)) if in_line.any() else -1
    behind_head = np.zeros(count, dtype=np.bool_)
    if head >= 0:
        behind_head[head + 1 :] = in_line[head + 1 :] & (units[head + 1 :] <= free)
        code[behind_head] = _CODE[BUDGET]
        code[head] = _CODE[BUDGET]
    return Waiting(code=code, until=until, head=head, behind_head=behind_head)


def _met_by_position(
    started_now: NDArray[np.bool_], org: Indices, units: NDArray[np.int64], retry: NDArray[np.bool_] | None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For each chart of the order, what the charts started at `now` after it took: how many of them
    are of its org (`org_after[i]`) and the retry units they hold (`retry_after[i]`).

    Only the charts up to the last one started differ from the state after the walk, so only that
    prefix is sorted (by org, keeping the order within an org); the walk usually starts its charts
    near the front of the order.
    """
    count = len(started_now)
    org_after = np.zeros(count, dtype=np.int64)
    retry_after = np.zeros(count, dtype=np.int64)
    started = np.flatnonzero(started_now)
    if not len(started):
        return org_after, retry_after
    last = int(started[-1]) + 1
    prefix_org = np.asarray(org[:last])
    by_org = np.argsort(prefix_org, kind="stable")
    taken = started_now[:last][by_org].astype(np.int64)
    # Within each org's run of the sorted prefix: the starts at or after each position, less its own.
    sorted_org = prefix_org[by_org]
    run_end = np.r_[np.flatnonzero(sorted_org[1:] != sorted_org[:-1]) + 1, last]
    run_start = np.r_[0, run_end[:-1]]
    suffix = np.cumsum(taken[::-1])[::-1]
    after_run = np.r_[suffix[run_end[:-1]], 0]
    org_after[by_org] = suffix - taken - np.repeat(after_run, run_end - run_start)
    if retry is not None:
        held = np.where(started_now & retry, units, 0)
        retry_after = np.cumsum(held[::-1])[::-1] - held
    return org_after, retry_after


def left_out_reasons(held: NDArray[np.bool_]) -> list[str]:
    """The reason of each chart left out of the order: its org is held, else it is paused."""
    names: NDArray[Any] = np.where(held, ORG_HELD.value, CHART_PAUSED.value).astype(object)
    return names.tolist()  # type: ignore[no-any-return]
