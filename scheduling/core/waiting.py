"""Why each waiting chart is not running now, and until when: the verdicts of the walk at `now`, the
first the replay makes (`Dispatcher.walk`, the one rule; see `waiting_reasons`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from .dispatcher import BUDGET, CHART_PAUSED, ORG_CAP, ORG_HELD, RETRY_BUDGET, START, TURN, UNAVAILABLE, Verdict
from .replay import ReplayInput, dispatcher_of

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


def reason_names(code: NDArray[np.int8]) -> list[str | None]:
    """The `Verdict` value of each code (None for NOT_WAITING)."""
    return _NAMES[code].tolist()  # type: ignore[no-any-return]


def waiting_reasons(given: ReplayInput, start: Sequence[float | None] | NDArray[np.float64]) -> Waiting:
    """The reason of each chart of the order (numbered 0..n-1 in it): the walk's verdicts at `now`.

    `given` is what the replay read, `start` the replay's start of each chart (None or nan: it
    never starts).
    1. The walk at `now` (`Dispatcher.walk`), with every running chart not finished by `now`
       occupying its units, its org's slot and its retry units: each chart it visits gets its
       verdict, up to the head of the line (BUDGET), where it stops.
    2. A chart behind the head gets the verdict the rule would give it against what the walk left
       (read in whole columns): UNAVAILABLE, ORG_CAP or RETRY_BUDGET as it fails a check; else
       BUDGET when the free budget would hold it (held behind the head), else TURN.
    3. `until`: `available_at` for UNAVAILABLE, else the predicted start (none for a chart that
       starts now).
    """
    count, org, units, later, retry = len(given.org), given.org, given.units, given.later, given.retry
    dispatcher = dispatcher_of(given, zip(given.later_at.tolist(), later.tolist(), strict=True))
    for finish, running_at, held, is_retry in zip(
        given.running_finish, given.running_org, given.running_units, given.running_retry, strict=True
    ):
        if finish > given.now:
            dispatcher.occupy(running_at, held, is_retry)
    walked = dispatcher.walk(range(count), given.now)

    code = np.full(count, _CODE[TURN], dtype=np.int8)
    if walked:
        code[: len(walked)] = [NOT_WAITING if verdict is START else _CODE[verdict] for _, verdict in walked]
    head = len(walked) - 1 if walked and walked[-1][1] is BUDGET else -1
    behind_head = np.zeros(count, dtype=np.bool_)
    if head >= 0:
        rest = slice(head + 1, count)
        rest_org, rest_units = org[rest], units[rest]
        cap = np.array([np.inf if limit is None else limit for limit in given.caps], dtype=np.float64)
        org_running = np.array(dispatcher.org_running, dtype=np.float64)
        fits = rest_units <= dispatcher.free_budget
        rest_code = np.where(fits, _CODE[BUDGET], _CODE[TURN]).astype(np.int8)
        capped = org_running[rest_org] >= cap[rest_org]
        skipped = capped.copy()
        if retry is not None and dispatcher.retry_free is not None:
            over_retry = retry[rest] & (rest_units > dispatcher.retry_free)
            rest_code[over_retry] = _CODE[RETRY_BUDGET]
            skipped |= over_retry
        rest_code[capped] = _CODE[ORG_CAP]  # checked before the retry budget
        behind_head[rest] = fits & ~skipped
        code[rest] = rest_code
        late = later[later > head]  # checked first of all
        code[late] = _CODE[UNAVAILABLE]
        behind_head[late] = False
    until = np.asarray(start, dtype=np.float64).copy()  # None (never starts) becomes nan
    until[later] = given.later_at
    until[code == NOT_WAITING] = np.nan
    return Waiting(code=code, until=until, head=head, behind_head=behind_head)


def left_out_reasons(held: NDArray[np.bool_]) -> list[str]:
    """The reason of each chart left out of the order: its org is held, else it is paused."""
    names: NDArray[Any] = np.where(held, ORG_HELD.value, CHART_PAUSED.value).astype(object)
    return names.tolist()  # type: ignore[no-any-return]
