"""The plain data the scheduling core works on: a scenario in, a plan out.

Every time is a number of seconds on the scenario's clock (`Scenario.now`). The core trusts these
values; `scheduling.core.io.parse_scenario` is where untrusted input is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Generic, Literal, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

Policy = Literal["round_robin", "deficit"]
POLICIES: tuple[Policy, ...] = ("round_robin", "deficit")


@dataclass(frozen=True, slots=True)
class OrgPolicy:
    """How an org shares the pool: its weight (0 holds it) and its cap on running charts.

    `served` (an extension, 0 by default) is what the org has already been given in the rounds under
    way: charts for `round_robin`, cost units for `deficit`. Its charts are counted from there, so
    its k-th chart falls in the round of k + served (`round_robin`) or of S_k + served (`deficit`).
    The live system keeps it across replans; without it, each replan would start every org at round
    0 again and the org with the oldest head would win every slot that frees one at a time. It keeps
    it as virtual time in rounds V (+1/weight per start, or cost/(weight x quantum), at the weight of
    the start) and passes served = (V - R) x weight (x quantum under deficit), R being the round
    under way: the least V among orgs that can start now, to which every other org is raised. A lever
    therefore never rescales an org's past: the new weight applies from the next round.
    """

    weight: int = 1
    max_concurrency: int | None = None
    served: float = 0.0


@dataclass(frozen=True, slots=True)
class QueuedChart:
    """A chart waiting to run."""

    id: str
    org: str
    created: float
    avg: float
    cost: int = 1
    high_priority: bool = False
    paused: bool = False
    priority: int = 0
    available_at: float | None = None
    retry: bool = False


@dataclass(frozen=True, slots=True)
class RunningChart:
    """A chart in flight since `started`."""

    id: str
    org: str
    started: float
    avg: float
    cost: int = 1
    retry: bool = False


@dataclass(frozen=True, slots=True)
class Arrival:
    """Charts an org is expected to submit (an extension, see `scheduling.core.forecast`): one of
    the given expected duration, cost and spread every 1 / `rate` seconds from now until `until`.
    With a `ramp` (seconds, 0 by default) the stream starts slowly: its rate t seconds from now is
    `rate` x (1 - e^(-t / ramp)), as for orgs not seen yet, which must first arrive."""

    org: str
    rate: float
    until: float
    avg: float
    cost: int = 1
    spread: float = 0.0
    ramp: float = 0.0


@dataclass(frozen=True, slots=True)
class Submission:
    """Charts an org submitted at `created` (an extension, see `scheduling.core.forecast`): `count`
    charts of the given expected duration, cost and spread. The recent past from which the core
    derives the arrivals it expects (`Scenario.history`)."""

    org: str
    created: float
    avg: float
    cost: int = 1
    spread: float = 0.0
    count: int = 1


@dataclass(frozen=True, slots=True)
class History:
    """The submissions of the recent past, complete from `since`, from which the core expects the
    arrivals to come (see `scheduling.core.forecast.forecast`). A submission counts less the older
    it is: its weight falls by e every `decay` seconds."""

    submissions: Sequence[Submission]
    since: float
    decay: float = 600.0


@dataclass(frozen=True, slots=True)
class Aging:
    """Waiting bonus: +1 priority per `step` seconds waited, at most `cap`."""

    step: float
    cap: int


@dataclass(frozen=True, slots=True)
class Scenario:
    """A snapshot of the queue, what runs and the levers, at the instant `now`."""

    now: float
    budget: int
    policy: Policy = "round_robin"
    quantum: float = 1.0
    aging: Aging | None = None
    orgs: Mapping[str, OrgPolicy] = field(default_factory=dict)
    queued: Sequence[QueuedChart] = ()
    running: Sequence[RunningChart] = ()
    retry_budget: int | None = None
    # Extensions for the ETAs only (see `scheduling.core.forecast`); the order never depends on them.
    arrivals: Sequence[Arrival] = ()
    # The log-sigma of each chart's duration: `spread` aligned with `queued`, `running_spread` with
    # `running`; empty when none is known (0 for every chart). Columns, not a map by id: a snapshot of a million charts
    # builds and the planner reads them without a lookup per chart.
    spread: Sequence[float] = ()
    running_spread: Sequence[float] = ()
    history: History | None = None


class ChartIds:
    """The ids of a plan's charts, indexed on the first lookup by id.

    A plan's starts and ETAs share one index; a caller that only iterates (the plan command
    writing JSON) never pays for it.
    """

    __slots__ = ("_slot", "ids")

    def __init__(self, ids: Sequence[str]) -> None:
        self.ids = ids
        self._slot: dict[str, int] | None = None

    def slot(self) -> dict[str, int]:
        """Each id's position in `ids`."""
        if self._slot is None:
            self._slot = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._slot


Value = TypeVar("Value")


class ChartValues(Mapping[str, Value], Generic[Value]):
    """A read-only value per chart id (the values aligned with the ids)."""

    __slots__ = ("_ids", "_times")

    def __init__(self, ids: ChartIds, times: Sequence[Value]) -> None:
        self._ids = ids
        self._times = times

    def __getitem__(self, chart_id: str) -> Value:
        return self._times[self._ids.slot()[chart_id]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids.ids)

    def __len__(self) -> int:
        return len(self._ids.ids)

    def as_dict(self) -> dict[str, Value]:
        """The same values as a plain dict."""
        return dict(zip(self._ids.ids, self._times, strict=True))

    def column(self) -> Sequence[Value]:
        """The values alone, in the order of the ids (as `as_dict` and iteration give them)."""
        return self._times


class LazyChartValues(ChartValues[Value]):
    """A read-only value per chart id, the values worked out by `load` on first use."""

    __slots__ = ("_load",)

    def __init__(self, ids: ChartIds, load: Callable[[], Sequence[Value]]) -> None:
        super().__init__(ids, ())
        self._load: Callable[[], Sequence[Value]] | None = load

    def _loaded(self) -> Sequence[Value]:
        if self._load is not None:
            self._times, self._load = self._load(), None
        return self._times

    def __getitem__(self, chart_id: str) -> Value:
        return self._loaded()[self._ids.slot()[chart_id]]

    def as_dict(self) -> dict[str, Value]:
        return dict(zip(self._ids.ids, self._loaded(), strict=True))

    def column(self) -> Sequence[Value]:
        return self._loaded()


class ChartTimes(ChartValues[float | None]):
    """A read-only time per chart id (the times aligned with the ids)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class PlanArrays:
    """A plan's rows as arrays, for a writer of whole columns (`scheduling.replan`), laid out as the
    plan's chart ids (as `Plan.start` iterates them): first the charts of the order, in its order,
    then the queued charts left out of it, then the running charts as `Scenario.running` lists them.

    `queued` is the index in `Scenario.queued` of each of the first `len(queued)` charts (those of
    the order, then those left out); `start`, `eta`, `eta_low` and `eta_high` are the plan's own
    values as floats, NaN for None.
    """

    queued: NDArray[np.intp]
    start: NDArray[np.float64]
    eta: NDArray[np.float64]
    eta_low: NDArray[np.float64]
    eta_high: NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Plan:
    """The fair order, predicted starts and finishes, and the clear-times of the orgs and the pool.

    `start` and `eta` map every queued and running chart's id to its time: None for a chart that
    is not eligible (or, under a retry budget, a retry that can never start). `org_clear` has a
    key for every org with a queued or running chart (None if none of its charts has an ETA): its
    latest ETA, or with spreads its median last finish, never before that (see
    `scheduling.core.forecast.median_last_finish`).
    `eta_low` and `eta_high` are each ETA's p10-p90 band, `org_clear_low` and `org_clear_high` the
    band of each org's clear-time: the ETAs themselves without spreads or expected arrivals (see
    `scheduling.core.forecast`).

    Why each queued chart is not running now, from the walk at `now` (see `scheduling.core.waiting`;
    None for a running chart and for one the walk starts at `now`): `reason` (a `Reason` value),
    `waiting_until` (when that reason lifts, as far as the plan knows) and `head_of_line` (for a
    chart the budget would hold now but the head of the line does not let by: that head's id).

    `arrays`: the same rows as arrays (`PlanArrays`).
    """

    order: list[str]
    start: Mapping[str, float | None]
    eta: Mapping[str, float | None]
    org_clear: dict[str, float | None]
    global_clear: float | None
    eta_low: Mapping[str, float | None]
    eta_high: Mapping[str, float | None]
    org_clear_low: dict[str, float | None]
    org_clear_high: dict[str, float | None]
    reason: ChartValues[str | None]
    waiting_until: ChartValues[float | None]
    head_of_line: ChartValues[str | None]
    # Not compared: the same values as the fields above, laid out by the scenario's queue order.
    arrays: PlanArrays = field(compare=False)


QUEUED_FIELDS = tuple(queued_field.name for queued_field in fields(QueuedChart))


@dataclass(slots=True)
class QueueColumns(Sequence[QueuedChart]):
    """Queued charts stored as one list per field: the same charts as a list of `QueuedChart`.

    The planner reads these lists directly, so a large queue parsed from JSON never needs one
    object per chart; indexing still gives a `QueuedChart`.
    """

    id: list[str]
    org: list[str]
    created: list[float]
    avg: list[float]
    cost: list[int]
    high_priority: list[bool]
    paused: list[bool]
    priority: list[int]
    available_at: list[float | None]
    retry: list[bool]

    @classmethod
    def of(cls, charts: Sequence[QueuedChart]) -> QueueColumns:
        """The columns of `charts` (returned as they are when they are columns already)."""
        if isinstance(charts, QueueColumns):
            return charts
        return cls(*(list(map(attrgetter(name), charts)) for name in QUEUED_FIELDS))

    def __len__(self) -> int:
        return len(self.id)

    @overload
    def __getitem__(self, index: int) -> QueuedChart: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[QueuedChart]: ...

    def __getitem__(self, index: int | slice) -> QueuedChart | Sequence[QueuedChart]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return QueuedChart(
            id=self.id[index],
            org=self.org[index],
            created=self.created[index],
            avg=self.avg[index],
            cost=self.cost[index],
            high_priority=self.high_priority[index],
            paused=self.paused[index],
            priority=self.priority[index],
            available_at=self.available_at[index],
            retry=self.retry[index],
        )

    def __iter__(self) -> Iterator[QueuedChart]:
        return (self[i] for i in range(len(self)))
