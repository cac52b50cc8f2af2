"""The plain data the scheduling core works on: a scenario in, a plan out.

Every time is a number of seconds on the scenario's clock (`Scenario.now`). The core trusts these
values; `scheduling.core.io.parse_scenario` is where untrusted input is checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Generic, Literal, TypeVar, overload

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
    due: float | None = None  # when its turnaround promise falls due (None: no promise)


@dataclass(frozen=True, slots=True)
class RunningChart:
    """A chart in flight since `started`."""

    id: str
    org: str
    started: float
    avg: float
    cost: int = 1
    retry: bool = False
    due: float | None = None  # when its turnaround promise falls due (None: no promise)


@dataclass(frozen=True, slots=True)
class Arrival:
    """Charts an org is expected to submit (an extension, see `scheduling.core.forecast`): one of
    the given expected duration, cost and spread every 1 / `rate` seconds from now until `until`.
    With a `ramp` (seconds, 0 by default) the stream starts slowly: its rate t seconds from now is
    `rate` x (1 - e^(-t / ramp)). With `after` (seconds, 0 by default) it begins only that long from
    now, as for an org not seen yet, which must first arrive."""

    org: str
    rate: float
    until: float
    avg: float
    cost: int = 1
    spread: float = 0.0
    ramp: float = 0.0
    after: float = 0.0


@dataclass(frozen=True, slots=True)
class PastSubmission:
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

    submissions: Sequence[PastSubmission]
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
    # "Due first inside the share": each org's own charts ordered by due time (the rounds untouched).
    due_first: bool = False
    # Extensions for the ETAs only (see `scheduling.core.forecast`); the order never depends on them.
    arrivals: Sequence[Arrival] = ()
    # The log-sigma of each chart's duration: `spread` aligned with `queued`, `running_spread` with
    # `running`; empty when none is known (0 for every chart). Columns, not a map by id: a snapshot of a million charts
    # builds and the planner reads them without a lookup per chart (`spread` may be a numpy array).
    spread: Sequence[float] | NDArray[np.float64] = ()
    running_spread: Sequence[float] = ()
    history: History | None = None


class ChartIds:
    """The ids of a plan's charts, listed on first use (`load`, if given instead of the ids) and
    indexed on the first lookup by id.

    A plan's values share one list of ids and one index; a caller that only iterates (the plan
    command writing JSON) never pays for the index, and one that reads only counts and columns
    (the replan, which writes the plan by the snapshot's own ids) never pays for the list: a
    million strings gathered in the fair order, a cache miss each.
    """

    __slots__ = ("_ids", "_load", "_slot", "count")

    def __init__(self, ids: Sequence[str] = (), *, load: Callable[[], Sequence[str]] | None = None, count: int = 0):
        self._ids = ids
        self._load = load
        self.count = count if load is not None else len(ids)
        self._slot: dict[str, int] | None = None

    @property
    def ids(self) -> Sequence[str]:
        """The ids, in the plan's layout."""
        if self._load is not None:
            self._ids, self._load = self._load(), None
        return self._ids

    def slot(self) -> dict[str, int]:
        """Each id's position in `ids`."""
        if self._slot is None:
            self._slot = dict(zip(self.ids, range(self.count), strict=True))
        return self._slot


class ChartOrder(Sequence[str]):
    """The ids of the charts of a plan's order: the first `count` of its `ChartIds`, which list
    them first, read from them (and so listed only when first read)."""

    __slots__ = ("_count", "_ids", "_listed")

    def __init__(self, ids: ChartIds, count: int) -> None:
        self._ids = ids
        self._count = count
        self._listed: Sequence[str] | None = None

    def _list(self) -> Sequence[str]:
        if self._listed is None:
            ids = self._ids.ids
            self._listed = ids if len(ids) == self._count else ids[: self._count]
        return self._listed

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._list()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same ids (a list among them)."""
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(other) == self._count and list(self._list()) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self._list()))


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
        return self._ids.count

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


@dataclass(frozen=True, slots=True)
class PlanArrays:
    """A plan's rows as arrays, for a writer of whole columns (`scheduling.replan`), laid out as the
    plan's chart ids (as `Plan.start` iterates them): first the charts of the order, in its order,
    then the queued charts left out of it, then the running charts as `Scenario.running` lists them.

    `queued` is the index in `Scenario.queued` of each of the first `len(queued)` charts (those of
    the order, then those left out); `start`, `eta`, `eta_low`, `eta_high` and `late_chance` are the
    plan's own values as floats, NaN for None.
    """

    queued: NDArray[np.intp]
    start: NDArray[np.float64]
    eta: NDArray[np.float64]
    eta_low: NDArray[np.float64]
    eta_high: NDArray[np.float64]
    late_chance: NDArray[np.float64]


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
    None for a running chart and for one the walk starts at `now`): `reason` (a `dispatcher.Verdict` value),
    `waiting_until` (when that reason lifts, as far as the plan knows) and `head_of_line` (for a
    chart the budget would hold now but the head of the line does not let by: that head's id).

    `late_chance`: each chart's chance of finishing after its due time (`QueuedChart.due`,
    `RunningChart.due`), from the law of its band (`scheduling.core.forecast.late_chance`); None
    for a chart without a due time or without an ETA.

    `arrays`: the same rows as arrays (`PlanArrays`).
    """

    order: Sequence[str]
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
    late_chance: Mapping[str, float | None]
    # Not compared: the same values as the fields above, laid out by the scenario's queue order.
    arrays: PlanArrays = field(compare=False)
    # Whether some chart has a due time (a plan's JSON gives `late_chance` only then).
    due_times: bool = field(default=False, compare=False)


QUEUED_FIELDS = tuple(queued_field.name for queued_field in fields(QueuedChart))

# A column of `QueueColumns` as given: a list, or (but `id` and `org`) a numpy array.
QueueColumn = list[Any] | NDArray[Any]


@dataclass(frozen=True, slots=True)
class QueueArrays:
    """The numeric and flag columns of a queue as numpy arrays, aligned with its charts (see
    `QueueColumns.arrays`). `avg` is int64 when it was given as ints (so the plan's times can stay
    ints), else float64; `available_at` is NaN where a chart is available now."""

    created: NDArray[np.float64]
    avg: NDArray[np.float64] | NDArray[np.int64]
    cost: NDArray[np.int64]
    high_priority: NDArray[np.bool_]
    paused: NDArray[np.bool_]
    priority: NDArray[np.int64]
    available_at: NDArray[np.float64]
    retry: NDArray[np.bool_]
    due: NDArray[np.float64]


class QueueColumns(Sequence[QueuedChart]):
    """Queued charts stored as one column per field: the same charts as a list of `QueuedChart`.

    The planner reads whole columns, so a large queue parsed from JSON or read from the database
    never needs one object per chart; indexing still gives a `QueuedChart`. A column is kept as it
    is given: a list (parsed JSON, where an int stays an int) or, for the numeric and flag
    columns, a numpy array (a snapshot reads them so; `available_at` NaN for none). Either way it
    reads both ways: the field's attribute is a list (made from an array on first read, None for
    NaN), `arrays` the numpy columns (made once from the lists on first read). A column is not
    changed once read: `replace` gives a queue with new ones.
    """

    __slots__ = ("_arrays", "_given", "_lists")

    def __init__(
        self,
        id: list[str],
        org: list[str],
        created: list[float] | NDArray[Any],
        avg: list[float] | NDArray[Any],
        cost: list[int] | NDArray[Any],
        high_priority: list[bool] | NDArray[Any],
        paused: list[bool] | NDArray[Any],
        priority: list[int] | NDArray[Any],
        available_at: list[float | None] | NDArray[Any],
        retry: list[bool] | NDArray[Any],
        due: list[float | None] | NDArray[Any] | None = None,
    ) -> None:
        if due is None:  # no chart has a due time
            due = np.full(len(id), np.nan)
        self._keep((id, org, created, avg, cost, high_priority, paused, priority, available_at, retry, due))

    def _keep(self, columns: Iterable[QueueColumn]) -> None:
        self._given: dict[str, QueueColumn] = dict(zip(QUEUED_FIELDS, columns, strict=True))
        self._lists: dict[str, list[Any]] = {
            name: column for name, column in self._given.items() if isinstance(column, list)
        }
        self._arrays: QueueArrays | None = None

    @classmethod
    def _of_given(cls, columns: Iterable[QueueColumn]) -> QueueColumns:
        """The queue of these columns (in the order of `QUEUED_FIELDS`), as given."""
        queue = cls.__new__(cls)
        queue._keep(columns)
        return queue

    @classmethod
    def of(cls, charts: Sequence[QueuedChart]) -> QueueColumns:
        """The columns of `charts` (returned as they are when they are columns already)."""
        if isinstance(charts, QueueColumns):
            return charts
        return cls(*(list(map(attrgetter(name), charts)) for name in QUEUED_FIELDS))

    def given(self, name: str) -> QueueColumn:
        """The column `name` as it was given: a list or an array."""
        return self._given[name]

    def replace(self, **columns: QueueColumn) -> QueueColumns:
        """A queue of the same charts with the columns named replaced by the ones given."""
        return QueueColumns._of_given(columns.get(name, self._given[name]) for name in QUEUED_FIELDS)

    def joined(self, more: QueueColumns) -> QueueColumns:
        """These charts followed by those of `more`: each column a list where this queue's was
        given as a list (its values as given: an int stays an int), else an array."""
        more_arrays = more.arrays
        return QueueColumns._of_given(
            given + more._list(name) if isinstance(given, list) else np.concatenate((given, getattr(more_arrays, name)))
            for name, given in self._given.items()
        )

    @property
    def arrays(self) -> QueueArrays:
        """The numeric and flag columns as numpy arrays, each made once."""
        if self._arrays is None:
            given = self._given
            avg = given["avg"]
            if isinstance(avg, list):
                avg = np.array(avg, dtype=np.int64 if all(type(value) is int for value in avg) else np.float64)
            self._arrays = QueueArrays(
                created=_array(given["created"], np.float64),
                avg=avg,
                cost=_array(given["cost"], np.int64),
                high_priority=_array(given["high_priority"], np.bool_),
                paused=_array(given["paused"], np.bool_),
                priority=_array(given["priority"], np.int64),
                available_at=_times_array(given["available_at"]),
                retry=_array(given["retry"], np.bool_),
                due=_times_array(given["due"]),
            )
        return self._arrays

    def _list(self, name: str) -> list[Any]:
        """The column `name` as a list, made from its array on first read."""
        column = self._lists.get(name)
        if column is None:
            given = self._given[name]
            assert not isinstance(given, list)
            column = self._lists[name] = times_list(given) if name in ("available_at", "due") else given.tolist()
        return column

    @property
    def id(self) -> list[str]:
        return self._lists["id"]

    @property
    def org(self) -> list[str]:
        return self._lists["org"]

    @property
    def created(self) -> list[float]:
        return self._list("created")

    @property
    def avg(self) -> list[float]:
        return self._list("avg")

    @property
    def cost(self) -> list[int]:
        return self._list("cost")

    @property
    def high_priority(self) -> list[bool]:
        return self._list("high_priority")

    @property
    def paused(self) -> list[bool]:
        return self._list("paused")

    @property
    def priority(self) -> list[int]:
        return self._list("priority")

    @property
    def available_at(self) -> list[float | None]:
        return self._list("available_at")

    @property
    def retry(self) -> list[bool]:
        return self._list("retry")

    @property
    def due(self) -> list[float | None]:
        return self._list("due")

    def __len__(self) -> int:
        return len(self._lists["id"])

    @overload
    def __getitem__(self, index: int) -> QueuedChart: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[QueuedChart]: ...

    def __getitem__(self, index: int | slice) -> QueuedChart | Sequence[QueuedChart]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return QueuedChart(*(self._list(name)[index] for name in QUEUED_FIELDS))

    def __iter__(self) -> Iterator[QueuedChart]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QueueColumns):
            return NotImplemented
        return all(self._list(name) == other._list(name) for name in QUEUED_FIELDS)

    def __repr__(self) -> str:
        return f"QueueColumns({', '.join(f'{name}={self._list(name)!r}' for name in QUEUED_FIELDS)})"


def _array(column: QueueColumn, dtype: type[np.generic]) -> NDArray[Any]:
    """A column as an array of `dtype` (the array itself when it has that type)."""
    if isinstance(column, list):
        return np.fromiter(column, dtype=dtype, count=len(column))
    return column.astype(dtype, copy=False)


def _times_array(column: QueueColumn) -> NDArray[np.float64]:
    """Times as floats, NaN for None."""
    if isinstance(column, list):
        if column.count(None) == len(column):  # (the usual queue: counted in C)
            return np.full(len(column), np.nan)
        return np.array(column, dtype=np.float64)
    return column.astype(np.float64, copy=False)


def times_list(column: QueueColumn) -> list[float | None]:
    """Times as a list, None for NaN (a list is given back as it is): the one rule for the
    core's float columns and the shell's (`scheduling.snapshot`)."""
    if isinstance(column, list):
        return column
    missing = np.isnan(column)
    if missing.all():
        return [None] * len(column)
    times: list[float | None] = column.tolist()
    for index in np.flatnonzero(missing).tolist():
        times[index] = None
    return times
