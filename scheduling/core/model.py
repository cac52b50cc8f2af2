"""The plain data the scheduling core works on: a scenario in, a plan out.

Every time is a number of seconds on the scenario's clock (`Scenario.now`). The core trusts these
values; `scheduling.core.io.parse_scenario` is where untrusted input is checked.
"""

from __future__ import annotations

import functools
from collections import UserList
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Annotated, Any, Generic, Literal, TypeVar, get_type_hints, overload

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
    A caller that replans keeps it across replans as virtual time (`service.fair_service`).
    """

    weight: int = 1
    max_concurrency: int | None = None
    served: float = 0.0


# A chart's id: a string in the contract's JSON, the live system's integer key in a snapshot (one
# kind in a scenario). Ties break by id, so either sorts as the charts were submitted.
ChartId = str | int


@dataclass(frozen=True, slots=True)
class Column:
    """How a field of the chart record is checked and kept (`QueuedChart`): its `rule` (as
    `scheduling.core.io` checks it) and whether None stands for no value (NaN in its array).

    "key" and "name" are strings (a key may be an int), kept as lists or (keys) an int64 array;
    "number" is any finite number and "duration" one > 0, float64 ("duration" int64 when given as
    ints, so the plan's times stay ints); "integer" and "units" (>= 1) int64; "flag" bool."""

    rule: Literal["key", "name", "number", "duration", "integer", "units", "flag"]
    optional: bool = False

    @property
    def dtype(self) -> type[np.generic]:
        return _DTYPES[self.rule]


_DTYPES: dict[str, type[np.generic]] = {
    "key": np.int64, "name": np.object_, "number": np.float64, "duration": np.float64,
    "integer": np.int64, "units": np.int64, "flag": np.bool_,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class QueuedChart:
    """A chart waiting to run: the one declaration of the queue's record. Each field's `Column`
    says how `io` checks it and how `QueueColumns` keeps it; its default is that of the JSON."""

    id: Annotated[ChartId, Column("key")]
    org: Annotated[str, Column("name")]
    created: Annotated[float, Column("number")]
    avg: Annotated[float, Column("duration")]
    cost: Annotated[int, Column("units")] = 1
    high_priority: Annotated[bool, Column("flag")] = False
    paused: Annotated[bool, Column("flag")] = False
    priority: Annotated[int, Column("integer")] = 0
    available_at: Annotated[float | None, Column("number", optional=True)] = None
    retry: Annotated[bool, Column("flag")] = False
    # When its turnaround promise falls due (None: no promise).
    due: Annotated[float | None, Column("number", optional=True)] = None


@dataclass(frozen=True, slots=True)
class RunningChart:
    """A chart in flight since `started` (its fields' `Column`s as `QueuedChart`'s)."""

    id: Annotated[ChartId, Column("key")]
    org: Annotated[str, Column("name")]
    started: Annotated[float, Column("number")]
    avg: Annotated[float, Column("duration")]
    cost: Annotated[int, Column("units")] = 1
    retry: Annotated[bool, Column("flag")] = False
    due: Annotated[float | None, Column("number", optional=True)] = None


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
    # At most this many cost units (c each) of `retry` charts, queued or running, at once (None: no
    # limit): the walk skips a retry that would exceed it (a retry whose c exceeds it never starts).
    retry_budget: int | None = None
    # "Due first inside the share": each org's own charts ordered by due time (the rounds untouched).
    due_first: bool = False
    # Extensions for the ETAs only (see `scheduling.core.forecast`); the order never depends on them.
    arrivals: Sequence[Arrival] = ()
    # The log-sigma of each chart's duration: `spread` aligned with `queued`, `running_spread` with
    # `running`; empty when none is known (0 for every chart). Columns (`spread` may be a numpy
    # array), so that neither the snapshot nor the planner looks a chart up by id.
    spread: Sequence[float] | NDArray[np.float64] = ()
    running_spread: Sequence[float] = ()
    history: History | None = None


class ChartIds:
    """The ids of a plan's charts, listed by `load` on first use and indexed on the first lookup by id.

    A plan's values share one list of ids and one index; a caller that only iterates (the plan
    command writing JSON) never pays for the index, and one that reads only counts and columns
    (the replan, which writes the plan by the snapshot's own ids) never pays for the list.
    """

    __slots__ = ("_ids", "_load", "_slot", "count")

    def __init__(self, load: Callable[[], Sequence[ChartId]], count: int):
        self._load: Callable[[], Sequence[ChartId]] | None = load
        self._ids: Sequence[ChartId] = ()
        self.count = count
        self._slot: dict[ChartId, int] | None = None

    @property
    def ids(self) -> Sequence[ChartId]:
        """The ids, in the plan's layout."""
        if self._load is not None:
            self._ids, self._load = self._load(), None
        return self._ids

    def slot(self) -> dict[ChartId, int]:
        """Each id's position in `ids`."""
        if self._slot is None:
            self._slot = dict(zip(self.ids, range(self.count), strict=True))
        return self._slot


class ChartOrder(UserList[ChartId]):
    """The ids of the charts of a plan's order: the first `count` of its `ChartIds`, which list
    them first, read from them (and so listed only when first read). Equal to a list of them."""

    def __init__(self, ids: ChartIds, count: int) -> None:
        self._ids = ids
        self._count = count

    @functools.cached_property
    def data(self) -> list[ChartId]:  # type: ignore[override]
        ids = list(self._ids.ids)
        return ids if len(ids) == self._count else ids[: self._count]

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:  # a slice too: a list (not another ChartOrder)
        return self.data[index]


Value = TypeVar("Value")


class ChartValues(Mapping[ChartId, Value], Generic[Value]):
    """A read-only value per chart id (the values aligned with the ids), or worked out by `load`
    on first use."""

    __slots__ = ("_ids", "_load", "_times")

    def __init__(
        self, ids: ChartIds, times: Sequence[Value] = (), *, load: Callable[[], Sequence[Value]] | None = None
    ) -> None:
        self._ids = ids
        self._times = times
        self._load = load

    def column(self) -> Sequence[Value]:
        """The values alone, in the order of the ids (as `as_dict` and iteration give them)."""
        if self._load is not None:
            self._times, self._load = self._load(), None
        return self._times

    def __getitem__(self, chart_id: ChartId) -> Value:
        return self.column()[self._ids.slot()[chart_id]]

    def __iter__(self) -> Iterator[ChartId]:
        return iter(self._ids.ids)

    def __len__(self) -> int:
        return self._ids.count

    def as_dict(self) -> dict[ChartId, Value]:
        """The same values as a plain dict."""
        return dict(zip(self._ids.ids, self.column(), strict=True))


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
    latest ETA, or with spreads its median last finish, never before that. `eta_low`, `eta_high`,
    `org_clear_low` and `org_clear_high`: the p10-p90 bands of those (the ETAs themselves without
    spreads or expected arrivals; see `forecast`).

    Why each queued chart is not running now (`waiting`; None for a running chart and one the walk
    starts at `now`): `reason` (a `dispatcher.Verdict` value), `waiting_until` (when it lifts, as
    far as the plan knows) and `head_of_line` (for a chart the budget would hold now but the head
    of the line does not let by: that head's id). `late_chance`: each chart's chance of finishing
    after its `due` time (`forecast.late_chance`; None without a due time or an ETA).
    """

    order: Sequence[ChartId]
    start: Mapping[ChartId, float | None]
    eta: Mapping[ChartId, float | None]
    org_clear: dict[str, float | None]
    global_clear: float | None
    eta_low: Mapping[ChartId, float | None]
    eta_high: Mapping[ChartId, float | None]
    org_clear_low: dict[str, float | None]
    org_clear_high: dict[str, float | None]
    reason: ChartValues[str | None]
    waiting_until: ChartValues[float | None]
    head_of_line: ChartValues[ChartId | None]
    late_chance: Mapping[ChartId, float | None]
    # Not compared: the same values as the fields above, laid out by the scenario's queue order.
    arrays: PlanArrays = field(compare=False)
    # Whether some chart has a due time (a plan's JSON gives `late_chance` only then).
    due_times: bool = field(default=False, compare=False)


def record_columns(record: type) -> dict[str, Column]:
    """Every field of a chart record (`QueuedChart`, `RunningChart`) and its `Column`, in order."""
    return {name: hint.__metadata__[0] for name, hint in get_type_hints(record, include_extras=True).items()}


def record_defaults(record: type) -> dict[str, Any]:
    """Each field's default (`dataclasses.MISSING` for a required one)."""
    return {record_field.name: record_field.default for record_field in fields(record)}


QUEUED_COLUMNS = record_columns(QueuedChart)
QUEUED_FIELDS = tuple(QUEUED_COLUMNS)
QUEUED_DEFAULTS = record_defaults(QueuedChart)

# A column of `QueueColumns` as given: a list, or (but `org`) a numpy array.
QueueColumn = list[Any] | NDArray[Any]


class QueueColumns(Sequence[QueuedChart]):
    """Queued charts stored as one column per field of `QueuedChart`: the same charts as a list of them.

    The planner reads whole columns, so a large queue never needs one object per chart; indexing
    still gives a `QueuedChart`. A column is kept as given: a list (parsed JSON, where an int stays
    an int) or, but for `org`, a numpy array (NaN for None); one not given holds the default. It
    reads both ways, each made on first read: the field's attribute is a list (None for NaN),
    `arrays` the numpy columns. A column is not changed once read: `replace` gives new ones.
    """

    __slots__ = ("_arrays", "_given", "_lists")

    def __init__(self, **columns: QueueColumn) -> None:
        count = len(columns["id"])
        self._given: dict[str, QueueColumn] = {
            name: columns[name] if name in columns else _filled(QUEUED_DEFAULTS[name], column, count)
            for name, column in QUEUED_COLUMNS.items()
        }
        self._lists: dict[str, list[Any]] = {
            name: column for name, column in self._given.items() if isinstance(column, list)
        }
        self._arrays: dict[str, NDArray[Any]] = {}

    @classmethod
    def of(cls, charts: Sequence[QueuedChart]) -> QueueColumns:
        """The columns of `charts` (returned as they are when they are columns already)."""
        if isinstance(charts, QueueColumns):
            return charts
        return cls(**{name: list(map(attrgetter(name), charts)) for name in QUEUED_FIELDS})

    def given(self, name: str) -> QueueColumn:
        """The column `name` as it was given: a list or an array."""
        return self._given[name]

    def replace(self, **columns: QueueColumn) -> QueueColumns:
        """A queue of the same charts with the columns named replaced by the ones given."""
        return QueueColumns(**(self._given | columns))

    def joined(self, more: QueueColumns) -> QueueColumns:
        """These charts followed by those of `more`: each column a list where this queue's was
        given as a list (its values as given: an int stays an int), else an array."""
        return QueueColumns(
            **{
                name: given + more._list(name) if isinstance(given, list) else np.concatenate((given, more.array(name)))
                for name, given in self._given.items()
            }
        )

    @property
    def arrays(self) -> QueueArrays:
        """The columns as numpy arrays, each made on first read."""
        return QueueArrays(self)

    def array(self, name: str) -> NDArray[Any]:
        """The column `name` as a numpy array of its `Column`'s type, made once."""
        column = self._arrays.get(name)
        if column is None:
            column = self._arrays[name] = _array(self._given[name], QUEUED_COLUMNS[name])
        return column

    def _list(self, name: str) -> list[Any]:
        """The column `name` as a list, made from its array on first read."""
        column = self._lists.get(name)
        if column is None:
            given = self._given[name]
            assert not isinstance(given, list)
            column = self._lists[name] = times_list(given) if QUEUED_COLUMNS[name].optional else given.tolist()
        return column

    def __getattr__(self, name: str) -> list[Any]:
        """A column as a list (`queue.cost`, ...)."""
        if name not in QUEUED_COLUMNS:
            raise AttributeError(name)
        return self._list(name)

    def __len__(self) -> int:
        return len(self._given["id"])

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


class QueueArrays:
    """A queue's columns as numpy arrays (`queue.arrays.cost`, ...; see `QueueColumns.array`)."""

    __slots__ = ("_queue",)

    def __init__(self, queue: QueueColumns) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> NDArray[Any]:
        if name not in QUEUED_COLUMNS:
            raise AttributeError(name)
        return self._queue.array(name)


def _filled(default: Any, column: Column, count: int) -> QueueColumn:
    """A column of `count` charts that all hold `default` (NaN for None)."""
    return np.full(count, np.nan if default is None else default, dtype=column.dtype)


def _array(given: QueueColumn, column: Column) -> NDArray[Any]:
    """A column as an array of its `Column`'s type (the array itself when it has that type):
    NaN for None; a "duration" given as ints only stays int64; "key" strings stay strings."""
    if not isinstance(given, list):
        return given if column.rule == "key" else given.astype(column.dtype, copy=False)
    if column.optional:
        if given.count(None) == len(given):  # (the usual queue: counted in C)
            return np.full(len(given), np.nan)
        return np.array(given, dtype=np.float64)
    if column.rule == "duration" and all(type(value) is int for value in given):
        return np.array(given, dtype=np.int64)
    if column.rule in ("key", "name") and not all(type(value) is int for value in given):
        return np.array(given, dtype=np.object_)
    return np.fromiter(given, dtype=column.dtype, count=len(given))


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
