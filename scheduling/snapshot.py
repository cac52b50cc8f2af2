"""The one place where database rows become the core's input: the replan's `Snapshot` (the core's
`Scenario`) and the dispatch pass's `DispatchView`.

A snapshot is read in a handful of queries, whatever the size of the backlog: the configuration, the
orgs, costs, duration statistics, provider pauses, then the waiting and the in-flight charts as rows
packed by the server, read into numpy columns (`packed_rows`). Times become seconds since the Unix
epoch, the core's clock.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import compress
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Count,
    DateTimeField,
    F,
    Field,
    FloatField,
    Func,
    IntegerField,
    OuterRef,
    Q,
    SmallIntegerField,
    Subquery,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone
from numpy.typing import NDArray

from charts.models import (
    ACTIVE_STATES,
    IN_FLIGHT_STATES,
    WAITING_STATES,
    Chart,
    ChartState,
    DurationStat,
    attempts_before_retry,
    is_retry,
    log_spread,
)
from knobs.models import SchedulerConfig
from orgs.models import Org, ProviderPause, Workflow, WorkflowCost, holds
from scheduling import copy_binary, core, packed_rows
from scheduling.core import durations as core_durations
from scheduling.core import service as core_service
from scheduling.core.planner import cyclic_gc_paused


class Epoch(Func):
    """Seconds since the Unix epoch of a timestamp column, as a float (the core's clock).

    `date_part` divides the microseconds by 10^6 in float8 arithmetic, one rounding: the same value
    as `EXTRACT(EPOCH ...)::float8`, which computes it exactly as a numeric and then rounds, and as
    `to_seconds` of the stored time, at half the server's time (issue 17, `bench/bench_replan.py`)."""

    template = "date_part('epoch', %(expressions)s)"
    output_field = FloatField()


def to_seconds(moment: datetime) -> float:
    return moment.timestamp()


def to_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


# The DurationStat fields that hold a pair's `core.durations.DurationState` (`duration_state_write`).
DURATION_STATE_FIELDS = (
    "count",
    "total_seconds",
    "sum_log",
    "sum_log_sq",
    "streak",
    "streak_seconds",
    "streak_sum_log",
    "settled_started_at",
    "streak_started_at",
    "learned",
)


def duration_state(stat: DurationStat) -> core_durations.DurationState:
    """The pure rule's state of a pair's row: its fading means, kept as `count` runs' worth of sums."""
    if stat.count == 0:
        return core_durations.DurationState()
    mean_log = stat.sum_log / stat.count
    return core_durations.DurationState(
        count=stat.count,
        mean_seconds=stat.total_seconds / stat.count,
        mean_log=mean_log,
        var_log=max(0.0, stat.sum_log_sq / stat.count - mean_log * mean_log),
        streak=stat.streak,
        streak_seconds=stat.streak_seconds,
        streak_log=stat.streak_sum_log,
        settled_started=_timestamp(stat.settled_started_at),
        streak_started=_timestamp(stat.streak_started_at),
        learned=stat.learned,
    )


def duration_state_write(stat: DurationStat, state: core_durations.DurationState) -> None:
    """Set `stat`'s DURATION_STATE_FIELDS to `state` (the caller saves them)."""
    stat.count = state.count
    stat.total_seconds = state.count * state.mean_seconds
    stat.sum_log = state.count * state.mean_log
    stat.sum_log_sq = state.count * (state.var_log + state.mean_log * state.mean_log)
    stat.streak = state.streak
    stat.streak_seconds = state.streak_seconds
    stat.streak_sum_log = state.streak_log
    stat.settled_started_at = to_datetime(state.settled_started)
    stat.streak_started_at = to_datetime(state.streak_started)
    stat.learned = state.learned


def _timestamp(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


@dataclass(frozen=True)
class Durations:
    """Expected run time of a chart by (org, workflow), with the learned spread of log(duration).

    The mean falls back from the (org, workflow) to the workflow's runs over every org, then the
    workflow's `initial_duration` (what its account manager says a run takes, until one is seen),
    then the org's runs, then the configured default: what a run takes depends on its workflow more
    than on its org. The spread (log sigma) follows the same chain, and where a level knows too
    little for one (nothing, or a single run) it is `default_spread`: the spread pooled over every
    pair loaded when they hold two runs or more, else FAIRSCHED_DEFAULT_DURATION_SPREAD. So the ETA
    band of a chart is widest where least is known, never collapsed. A pair's runs in flight, where
    given (`lasted`), count as runs longer than they have lasted (`core_durations.duration_censored`).
    """

    pair: dict[tuple[int, int], tuple[float, float]]
    by_org: dict[int, tuple[float, float]]
    by_workflow: dict[int, tuple[float, float]]
    default: float
    default_spread: float

    def of(self, org_id: int | None, workflow_id: int) -> tuple[float, float]:
        """(mean seconds, log sigma) for a chart of this org and workflow (no org: any org's)."""
        if org_id is None:
            return self.by_workflow.get(workflow_id) or (self.default, self.default_spread)
        return (
            self.pair.get((org_id, workflow_id))
            or self.by_workflow.get(workflow_id)
            or self.by_org.get(org_id)
            or (self.default, self.default_spread)
        )

    @classmethod
    def load(
        cls,
        *,
        org_id: int | None = None,
        workflow_ids: Collection[int] | None = None,
        initial: dict[int, int] | None = None,
        lasted: Mapping[tuple[int, int], Sequence[float]] | None = None,
    ) -> Durations:
        """Every statistic; or, given an org and workflows, only those that `of` needs for them. The
        workflows' initial durations are read here, unless the caller has them (`initial`, by id).
        `lasted`: by (org, workflow), the seconds each of its runs in flight has lasted."""
        pair: dict[tuple[int, int], core_durations.DurationState] = {}
        by_org: dict[int, _Sums] = defaultdict(_Sums)
        by_workflow: dict[int, _Sums] = defaultdict(_Sums)
        population = _Sums()
        stats = DurationStat.objects.filter(count__gt=0)
        if workflow_ids is not None:
            stats = stats.filter(Q(workflow_id__in=list(workflow_ids)) | Q(org_id=org_id))
        for stat in stats:
            pair[(stat.org_id, stat.workflow_id)] = duration_state(stat)
            for sums in (by_org[stat.org_id], by_workflow[stat.workflow_id], population):
                sums.add(stat)
        default_spread = population.spread()
        if default_spread is None:
            default_spread = float(settings.FAIRSCHED_DEFAULT_DURATION_SPREAD)
        if initial is None:
            stated = Workflow.objects.filter(initial_duration__isnull=False)
            if workflow_ids is not None:
                stated = stated.filter(pk__in=list(workflow_ids))
            initial = {pk: seconds for pk, seconds in stated.values_list("pk", "initial_duration") if seconds}
        initial_by_workflow = {pk: (float(seconds), default_spread) for pk, seconds in initial.items()}
        lasted = lasted or {}
        return cls(
            pair={
                key: _pair_estimate(
                    core_durations.duration_censored(state, lasted.get(key, ()), spread=default_spread), default_spread
                )
                for key, state in pair.items()
            },
            by_org={key: sums.mean_sigma(default_spread) for key, sums in by_org.items()},
            by_workflow=initial_by_workflow
            | {key: sums.mean_sigma(default_spread) for key, sums in by_workflow.items()},
            default=float(settings.FAIRSCHED_DEFAULT_DURATION),
            default_spread=default_spread,
        )


def _pair_estimate(state: core_durations.DurationState, unknown_spread: float) -> tuple[float, float]:
    """(mean seconds, log sigma of its next run) of a pair by the pure rule
    (`core_durations.predictive_sigma`), the sigma `unknown_spread` under two runs."""
    sigma = core_durations.predictive_sigma(state)
    return state.mean_seconds, unknown_spread if sigma is None else sigma


@dataclass
class _Sums:
    """Pooled duration sums of one or several (org, workflow) statistics."""

    count: int = 0
    total: float = 0.0
    sum_log: float = 0.0
    sum_log_sq: float = 0.0

    def add(self, stat: DurationStat) -> None:
        self.count += stat.count
        self.total += stat.total_seconds
        self.sum_log += stat.sum_log
        self.sum_log_sq += stat.sum_log_sq

    def spread(self) -> float | None:
        return log_spread(count=self.count, sum_log=self.sum_log, sum_log_sq=self.sum_log_sq)

    def mean_sigma(self, unknown_spread: float) -> tuple[float, float]:
        """(mean seconds, log sigma), the sigma `unknown_spread` under two runs."""
        spread = self.spread()
        return self.total / self.count, unknown_spread if spread is None else spread


@dataclass(frozen=True)
class Snapshot:
    """The core's scenario plus what the shell needs to map the plan back to rows."""

    now: datetime
    scenario: core.Scenario
    config: SchedulerConfig
    org_slugs: dict[str, str]
    # The rows of the queued and of the running charts, aligned with `scenario.queued` and
    # `scenario.running` (the plan's writer takes the chart ids from them as arrays).
    waiting: ActiveCharts
    in_flight: ActiveCharts
    # The workflow of each queued chart, aligned with `scenario.queued` (for what-if cost changes).
    queued_workflow: list[int] = field(default_factory=list)
    # The round under way (see `fair_service`): every org's virtual time is raised to it, or None.
    round_under_way: float | None = None
    # Which queued charts a paused provider holds later than their own backoff, aligned with
    # `scenario.queued` (`availability`).
    provider_paused: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    # The org rows the scenario was built from, by core key (`load_orgs`, read at step 1).
    org_rows: dict[str, OrgRow] = field(default_factory=dict)


def org_key(org_id: int) -> str:
    return str(org_id)


def load_config() -> SchedulerConfig:
    return SchedulerConfig.load()


@dataclass(frozen=True)
class OrgRow:
    slug: str
    weight: int
    max_concurrency: int | None
    served: float
    weight_before_hold: int | None

    @property
    def held(self) -> bool:
        return holds(self.weight)


def load_orgs() -> dict[str, OrgRow]:
    """Every org's row by core key."""
    return {
        org_key(org_id): OrgRow(slug, weight, cap, served, before)
        for org_id, slug, weight, cap, served, before in Org.objects.values_list(
            "id", "slug", "weight", "max_concurrency", "served", "weight_before_hold"
        )
    }


def fair_service(
    org_rows: dict[str, OrgRow], *, ready: set[str], backlogged: set[str], policy: str, quantum: float
) -> tuple[dict[str, core.OrgPolicy], float | None]:
    """Each org's policy for the core, with its place in the rounds under way, and that round: the
    core's rule (`scheduling.core.service.fair_service`) over the org rows, whose `served` is each
    org's virtual time in rounds. The replan raises every org to the round it returns."""
    return core_service.fair_service(
        {key: core_service.OrgService(row.weight, row.max_concurrency, row.served) for key, row in org_rows.items()},
        ready=ready,
        backlogged=backlogged,
        policy=policy,
        quantum=quantum,
    )


# The cost rule, written once for Python (`run_cost`) and for SQL (`run_cost_expression`): the first
# of these terms that is known is what one run of a chart costs. The cost its claim recorded (a chart
# in flight keeps what it took, whatever was changed since); its org's override for its workflow;
# its workflow's default.
COST_TERMS = ("recorded", "override", "default")


def run_cost(*, default: int, override: int | None = None, recorded: int | None = None) -> int:
    """What one run of a chart costs, by COST_TERMS."""
    known = {"recorded": recorded, "override": override, "default": default}
    return next(cost for term in COST_TERMS if (cost := known[term]) is not None)


def run_cost_expression(*, recorded: bool = False) -> Coalesce:
    """`run_cost` as the expression of a chart query (a correlated subquery for the override);
    `recorded`: the chart's recorded cost first (for charts in flight)."""
    override = WorkflowCost.objects.filter(org_id=OuterRef("org_id"), workflow_id=OuterRef("workflow_id"))
    terms = {
        "recorded": F("cost"),
        "override": Subquery(override.values("cost")[:1]),
        "default": F("workflow__default_cost"),
    }
    chain = [terms[term] for term in COST_TERMS if recorded or term != "recorded"]
    return Coalesce(*chain, output_field=IntegerField())


@dataclass(frozen=True)
class Costs:
    """What a run costs (by `run_cost`) and which provider it calls."""

    overrides: dict[tuple[int, int], int]
    defaults: dict[int, int]
    providers: dict[int, int | None]
    # Active provider pauses: (provider, org or None for everyone) -> until, in seconds.
    pauses: dict[tuple[int, int | None], float]

    def of(self, org_id: int | None, workflow_id: int, *, recorded: int | None = None) -> int:
        """What a run of the workflow costs the org (no org: any org without an override), by
        `run_cost`; `recorded` the cost a claim recorded, if any."""
        override = None if org_id is None else self.overrides.get((org_id, workflow_id))
        return run_cost(recorded=recorded, override=override, default=self.defaults[workflow_id])

    def pause_until(self, org_id: int, workflow_id: int) -> float | None:
        """When the pauses of the provider of an (org, workflow)'s charts end, for everyone and for
        the org: the later of them, or None if neither is active."""
        provider_id = self.providers.get(workflow_id)
        if provider_id is None or not self.pauses:
            return None
        ends = [self.pauses[key] for key in ((provider_id, None), (provider_id, org_id)) if key in self.pauses]
        return max(ends, default=None)


@dataclass(frozen=True)
class Availability:
    """When charts may start (`available_at`, seconds since the epoch, NaN: now) and which of them a
    provider pause holds later than their own backoff (`provider_paused`), aligned with the charts."""

    available_at: NDArray[np.float64]
    provider_paused: NDArray[np.bool_]


def availability(own: NDArray[np.float64], pause: NDArray[np.float64]) -> Availability:
    """The rule of when a chart may start, written once: the later of its own backoff (`own`) and the
    end of its provider's pause for everyone or for its org (`pause`), either NaN when there is none.
    The snapshot's queue, the dispatch walk and the what-if all take it from here."""
    available_at = np.fmax(own, pause)  # NaN is no time: the other one wins
    return Availability(available_at, (available_at != own) & ~np.isnan(available_at))


def load_costs(now: datetime) -> Costs:
    """Cost overrides, default costs, providers and the provider pauses active at `now`."""
    overrides = {(o, w): c for o, w, c in WorkflowCost.objects.values_list("org_id", "workflow_id", "cost")}
    defaults: dict[int, int] = {}
    providers: dict[int, int | None] = {}
    for workflow_id, cost, provider_id in Workflow.objects.values_list("id", "default_cost", "provider_id"):
        defaults[workflow_id] = cost
        providers[workflow_id] = provider_id
    pauses: dict[tuple[int, int | None], float] = {}
    for provider_id, org_id, until in ProviderPause.objects.filter(until__gt=now).values_list(
        "provider_id", "org_id", Epoch("until")
    ):
        key = (provider_id, org_id)
        pauses[key] = max(until, pauses.get(key, until))
    return Costs(overrides, defaults, providers, pauses)


def aging_of(config: SchedulerConfig) -> core.Aging | None:
    return core.Aging(step=config.aging_step, cap=config.aging_cap) if config.aging_step else None


def retry_budget_of(config: SchedulerConfig) -> int | None:
    return None if config.retry_budget_share >= 1 else config.retry_budget


@dataclass(frozen=True)
class DispatchOrg:
    """An org as the dispatch pass sees it: its weight (0: held) and its cap on charts in flight."""

    id: int
    weight: int
    max_concurrency: int | None

    @property
    def held(self) -> bool:
        return holds(self.weight)


@dataclass(frozen=True)
class InFlightRun:
    """A claimed or running chart: the org it counts against, the cost it holds, whether it is a retry."""

    org_id: int
    cost: int
    retry: bool


@dataclass(frozen=True)
class Candidate:
    """A waiting chart as the dispatch walk reads it.

    `cost` is what its run will hold (`Costs.of`); `available_at` when it may start (`availability`:
    the later of its own backoff and any pause of its provider, seconds since the epoch, or None:
    now); `provider_paused` whether such a pause holds it later than its own backoff; `retry`
    whether its run will be one.
    """

    cost: int
    available_at: float | None
    provider_paused: bool
    retry: bool


@dataclass(frozen=True)
class DispatchView:
    """What the dispatch pass reads before it walks the persisted order, as typed data: the clock, the
    configuration, costs and provider pauses, the orgs (in the order whose index the core's
    `Dispatcher` uses for them) and the charts in flight. The waiting charts themselves are read by the
    pass a page at a time in their persisted order (it claims those rows); `candidate` maps each."""

    now: datetime
    config: SchedulerConfig
    costs: Costs
    orgs: tuple[DispatchOrg, ...]
    in_flight: tuple[InFlightRun, ...]

    @property
    def instant(self) -> float:
        return to_seconds(self.now)

    @property
    def retry_budget(self) -> int | None:
        return retry_budget_of(self.config)

    @property
    def held(self) -> frozenset[int]:
        """The orgs on hold (weight 0): their charts are never visited."""
        return frozenset(org.id for org in self.orgs if org.held)

    def candidates(self, page: Sequence[Chart]) -> list[Candidate]:
        """Each chart of `page` (a page of the persisted order, as the dispatch pass reads it) as
        the walk reads it, its availability by the snapshot's one rule (`availability`)."""
        own = np.array(
            [np.nan if chart.available_at is None else to_seconds(chart.available_at) for chart in page],
            dtype=np.float64,
        )
        pause = np.array([self.costs.pause_until(chart.org_id, chart.workflow_id) for chart in page], dtype=np.float64)
        available = availability(own, pause)
        return [
            Candidate(
                cost=self.costs.of(chart.org_id, chart.workflow_id),
                available_at=available_at,
                provider_paused=provider_paused,
                retry=is_retry(state=chart.state, attempt=chart.attempt),
            )
            for chart, available_at, provider_paused in zip(
                page, core.times_list(available.available_at), available.provider_paused.tolist(), strict=True
            )
        ]


def load_dispatch_view(*, now: datetime | None = None) -> DispatchView:
    """Read what a dispatch pass needs besides the order. Steps:

    1. The configuration, and the costs, providers and provider pauses active at `now`.
    2. Every org's weight and cap.
    3. The charts in flight (dispatching, running) with the cost they hold: the cost recorded at their
       claim, else what a run of theirs costs now.
    """
    now = now or timezone.now()
    config = load_config()
    costs = load_costs(now)
    orgs = tuple(
        DispatchOrg(org_id, weight, cap)
        for org_id, weight, cap in Org.objects.values_list("id", "weight", "max_concurrency")
    )
    in_flight = tuple(
        InFlightRun(org_id, costs.of(org_id, workflow_id, recorded=cost), is_retry(state=state, attempt=attempt))
        for org_id, workflow_id, cost, state, attempt in Chart.objects.filter(state__in=IN_FLIGHT_STATES).values_list(
            "org_id", "workflow_id", "cost", "state", "attempt"
        )
    )
    return DispatchView(now=now, config=config, costs=costs, orgs=orgs, in_flight=in_flight)


# A snapshot is a few hundred thousand small objects made in bursts: the cyclic collector would walk
# them all at every burst, for nothing (they hold no cycles), as it would the plan's.
@cyclic_gc_paused()
def load_snapshot(*, now: datetime | None = None) -> Snapshot:
    """Read the whole queue and what runs into one `Snapshot`.

    1. The configuration, the orgs' policies, costs, providers, durations and active provider pauses.
    2. The waiting and the in-flight charts (`ActiveCharts.load`), from one consistent view of the
       table (one statement, or two backends that share one snapshot): a chart claimed while the
       snapshot is read is either still waiting or already in flight, never both.
    3. The waiting charts (queued, paused, retry_wait) as the core's columns (`_waiting_columns`): cost from the
       (org, workflow) override or the workflow's default; `available_at` is the later of the retry
       backoff and any pause of the chart's provider (for everyone or for its org); a chart that
       spent an attempt is a retry (`charts.models.is_retry`); `due` is the chart's `due_at`.
    4. The in-flight charts (dispatching, running) with the cost they hold and their `due_at`; a
       claimed chart that has not started yet counts as started when it was claimed.
    5. Each org's place in the rounds under way, and the recent submissions (`recent_history`).
    """
    now = now or timezone.now()
    config = load_config()
    org_rows = load_orgs()
    costs = load_costs(now)
    charts = ActiveCharts.load()
    in_flight = charts.where(charts.in_states(IN_FLIGHT_STATES))
    durations = Durations.load(lasted=_lasted(in_flight, now))
    waiting = charts.where(charts.in_states(WAITING_STATES))
    waiting_columns = _waiting_columns(waiting, costs, durations)
    running, running_spread = _running(in_flight, now, costs, durations)

    # A spread only where one is known: with none, the plan's bands are its ETAs themselves.
    spread_known = bool(waiting_columns.spread.any()) or any(running_spread)
    backlogged, ready = backlogged_and_ready(waiting_columns.columns, running, org_rows, to_seconds(now))
    orgs, round_under_way = fair_service(
        org_rows, ready=ready, backlogged=backlogged, policy=config.policy, quantum=config.quantum
    )
    for org in {*waiting_columns.columns.org, *(r.org for r in running)} - orgs.keys():
        orgs[org] = core.OrgPolicy()  # an org newer than the read above
    scenario = core.Scenario(
        now=to_seconds(now),
        budget=config.budget,
        policy=config.policy,  # type: ignore[arg-type]
        quantum=config.quantum,
        aging=aging_of(config),
        orgs=orgs,
        queued=waiting_columns.columns,
        running=running,
        retry_budget=retry_budget_of(config),
        due_first=config.due_first,
        history=recent_history(now, config, org_rows, costs, durations),
        spread=waiting_columns.spread if spread_known else [],
        running_spread=running_spread if spread_known else [],
    )
    return Snapshot(
        now=now,
        scenario=scenario,
        config=config,
        org_slugs={key: row.slug for key, row in org_rows.items()},
        waiting=waiting,
        in_flight=in_flight,
        queued_workflow=waiting.workflow_id.tolist(),
        round_under_way=round_under_way,
        provider_paused=waiting_columns.provider_paused,
        org_rows=org_rows,
    )


@dataclass(frozen=True)
class ActiveCharts:
    """The waiting and in-flight charts as aligned columns, one array a field. Times are seconds since
    the Unix epoch (the `Epoch` of each column, to the bit), NaN for none: `available_at` without a
    backoff, `started` neither started nor claimed, `due` without a turnaround promise; `cost` 0
    where none is recorded; `state` the index of the chart's state in `ACTIVE_STATES`."""

    id: NDArray[np.int64]
    org_id: NDArray[np.int64]
    workflow_id: NDArray[np.int64]
    created: NDArray[np.float64]
    available_at: NDArray[np.float64]
    high_priority: NDArray[np.bool_]
    priority: NDArray[np.int32]
    state: NDArray[np.int16]
    attempt: NDArray[np.int32]
    cost: NDArray[np.int32]
    started: NDArray[np.float64]
    due: NDArray[np.float64]

    @classmethod
    def load(cls) -> ActiveCharts:
        """Every chart in an active state, unsorted (the plan does not depend on the order the charts
        come in, a property of the core's tests, so the server need not sort the whole queue), read as
        packed rows (`packed_rows`): no Python step per chart. Each field is cast to the kind it is
        sent as, and none is NULL: a missing time is -infinity (no real time is), a missing cost 0 (a
        cost is at least 1), the state its index; the small fields come two to an int8
        (`_SMALL_FIELDS`). A large table (`SPLIT_FROM_ROWS`) is read by two backends at once
        (`packed_rows.read_in_halves`, from one snapshot: as one statement would), unless the caller
        holds a transaction (whose rows only its own connection sees)."""
        never = RawSQL("'-infinity'::timestamptz", (), output_field=DateTimeField())
        state = Case(*(When(state=state, then=index) for index, state in enumerate(ACTIVE_STATES)))
        fields: dict[str, tuple[Any, copy_binary.Kind]] = {
            "id": (F("id"), "int8"),  # first: the halves are its even and its odd values
            "org_id": (F("org_id"), "int8"),
            "workflow_id": (F("workflow_id"), "int8"),
            "created": (F("created_at"), "timestamptz"),
            "available_at": (Coalesce("available_at", never), "timestamptz"),
            "started": (Coalesce("started_at", "claimed_at", never), "timestamptz"),
            "due": (Coalesce("due_at", never), "timestamptz"),
            # The small fields go two to an int8 (`_SMALL_FIELDS`): a send call and a concatenation
            # fewer on the server for each (~10% of its time at 1M rows).
            "priority_attempt": (_bits(F("priority"), 32).bitor(_bits(F("attempt"))), "int8"),
            "cost_state_high": (
                _bits(Coalesce("cost", 0), 32)
                .bitor(_bits(state, 1))
                .bitor(_bits(Cast("high_priority", IntegerField()))),
                "int8",
            ),
        }
        query = (
            Chart.objects.filter(state__in=ACTIVE_STATES)
            .order_by()
            .values_list(*(Cast(expression, _CAST_TO[kind]) for expression, kind in fields.values()))
        )
        sql, params = query.query.sql_with_params()
        kinds = [kind for _, kind in fields.values()]
        if connection.in_atomic_block or _table_rows(Chart) < SPLIT_FROM_ROWS:
            columns = packed_rows.read(sql, params, kinds)
        else:
            columns = packed_rows.read_in_halves(sql, params, kinds)
            # The halves come end to end (even ids, then odd ones). The plan does not depend on the
            # order, but its fair order runs fastest on a queue whose ids ascend as they come from a
            # table read in one piece (`core.order`: runs of one creation second in one ascending
            # stretch of ids skip their sort): in bench_replan at 1M, 3.7 s of core plan on the
            # halves as they came against 2.3 s read in one piece. Two ascending runs: one merge.
            by_id = np.argsort(columns[0], kind="stable")
            columns = [column[by_id] for column in columns]
        values = dict(zip(fields, columns, strict=True))
        for name, (_, kind) in fields.items():
            if kind == "timestamptz":
                seconds = copy_binary.epoch_seconds(values[name])
                seconds[np.isneginf(seconds)] = np.nan
                values[name] = seconds
        for name in ("priority_attempt", "cost_state_high"):
            word = values.pop(name)
            for small, (shift, width, dtype) in _SMALL_FIELDS[name].items():
                bits = word >> shift  # (arithmetic: the top field keeps its sign)
                values[small] = (bits if shift + width == 64 else bits & ((1 << width) - 1)).astype(dtype)
        return cls(**values)

    def in_states(self, states: Collection[str]) -> NDArray[np.bool_]:
        """Which charts are in one of `states`."""
        return np.isin(self.state, [ACTIVE_STATES.index(state) for state in states])

    def where(self, mask: NDArray[np.bool_]) -> ActiveCharts:
        """The charts that `mask` marks (all of them: these same columns, not a copy)."""
        if mask.all():
            return self
        return ActiveCharts(**{name: getattr(self, name)[mask] for name in ActiveCharts.__dataclass_fields__})


# From this many rows in the chart table (the planner's estimate, finished charts included), the active
# charts are read by two backends at once. Below it the halves would spare at most ~0.1 s of the
# server's packing, while a second connection costs 10-17 ms to open and a second scan of the table
# (a judgement, not a measured crossover: see `bench/bench_replan.py`).
SPLIT_FROM_ROWS = 200_000


def _table_rows(model: type[Chart]) -> float:
    """The planner's estimate of the rows of a model's table (-1: never analyzed)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
        (rows,) = cursor.fetchone()
    return float(rows)


def _bits(value: Any, shift: int = 0) -> Any:
    """`value` as a bigint, shifted left by `shift` bits (an expression of the chart query)."""
    wide = Cast(value, BigIntegerField())
    return wide.bitleftshift(shift) if shift else wide


# Where each small field sits in its int8 (`ActiveCharts.load`): (shift, width in bits, numpy type).
# The fields below priority and cost are never negative (attempt and cost by their CHECKs, state an
# index, high_priority 0 or 1), so OR-ing them in leaves the bits above them alone, and the top
# field, read by an arithmetic shift, keeps its sign.
_SMALL_FIELDS: dict[str, dict[str, tuple[int, int, type[np.generic]]]] = {
    "priority_attempt": {"priority": (32, 32, np.int32), "attempt": (0, 32, np.int32)},
    "cost_state_high": {"cost": (32, 32, np.int32), "state": (1, 31, np.int16), "high_priority": (0, 1, np.bool_)},
}


# The Django field whose cast (`::bigint`, ...) gives each COPY kind.
_CAST_TO: dict[copy_binary.Kind, Field[Any, Any]] = {
    "int8": BigIntegerField(),
    "int4": IntegerField(),
    "int2": SmallIntegerField(),
    "bool": BooleanField(),
    "timestamptz": DateTimeField(),
}


@dataclass(frozen=True)
class _WaitingColumns:
    """The waiting charts as the core's columns, their spreads and which of them a provider pause
    holds later than their own backoff (both aligned with the columns)."""

    columns: core.QueueColumns
    spread: NDArray[np.float64]
    provider_paused: NDArray[np.bool_]


def _waiting_columns(waiting: ActiveCharts, costs: Costs, durations: Durations) -> _WaitingColumns:
    """The waiting charts as the core's columns (see `load_snapshot`, step 3). Cost, expected duration,
    spread and provider pause are looked up once per (org, workflow) pair; each chart takes its
    pair's through one numpy index. The numeric and flag columns go to the core as the arrays they
    are (it reads them so; a list of each is made only if someone asks), the ids too (the core takes
    the primary keys as they are: ties break by id, so they sort as the charts were submitted), the
    orgs as a list of keys made from an array at once."""
    pair_of, pairs = _pair_codes(waiting.org_id, waiting.workflow_id)
    pair_cost = np.array([costs.of(*pair) for pair in pairs], dtype=np.int64)
    pair_duration = np.array([durations.of(*pair) for pair in pairs], dtype=np.float64).reshape(-1, 2)
    pair_org = np.array([org_key(org_id) for org_id, _ in pairs], dtype=object)
    if costs.pauses:
        pause = np.array([costs.pause_until(*pair) for pair in pairs], dtype=np.float64)[pair_of]  # None: NaN
        available = availability(waiting.available_at, pause)
    else:
        available = Availability(waiting.available_at, np.zeros(len(waiting.id), dtype=np.bool_))
    paused = waiting.state == ACTIVE_STATES.index(ChartState.PAUSED)
    spent = attempts_before_retry(ChartState.QUEUED)  # the same for every state in the queue (`is_retry`)
    columns = core.QueueColumns(
        id=waiting.id,
        org=pair_org[pair_of].tolist(),
        created=waiting.created,
        avg=pair_duration[pair_of, 0],
        cost=pair_cost[pair_of],
        high_priority=waiting.high_priority,
        paused=paused,
        priority=waiting.priority.astype(np.int64),
        available_at=available.available_at,
        retry=waiting.attempt > spent,
        due=waiting.due,
    )
    return _WaitingColumns(columns, pair_duration[pair_of, 1], available.provider_paused)


def _lasted(in_flight: ActiveCharts, now: datetime) -> dict[tuple[int, int], list[float]]:
    """By (org, workflow), the seconds each in-flight chart has run (from its start, else its claim)."""
    lasted: dict[tuple[int, int], list[float]] = defaultdict(list)
    instant = to_seconds(now)
    for org_id, workflow_id, started in zip(
        in_flight.org_id.tolist(), in_flight.workflow_id.tolist(), core.times_list(in_flight.started), strict=True
    ):
        if started is not None:
            lasted[(org_id, workflow_id)].append(instant - started)
    return dict(lasted)


def _running(
    in_flight: ActiveCharts, now: datetime, costs: Costs, durations: Durations
) -> tuple[list[core.RunningChart], list[float]]:
    """The in-flight charts (see `load_snapshot`, step 4; they are few) and their spreads."""
    running: list[core.RunningChart] = []
    spread: list[float] = []
    for chart_id, org_id, workflow_id, started, state, attempt, cost, due in zip(
        in_flight.id.tolist(), in_flight.org_id.tolist(), in_flight.workflow_id.tolist(),
        core.times_list(in_flight.started), in_flight.state.tolist(), in_flight.attempt.tolist(),
        in_flight.cost.tolist(), core.times_list(in_flight.due),
        strict=True,
    ):  # fmt: skip
        mean, sigma = durations.of(org_id, workflow_id)
        running.append(
            core.RunningChart(
                id=chart_id,
                org=org_key(org_id),
                started=started if started is not None else to_seconds(now),
                avg=mean,
                cost=costs.of(org_id, workflow_id, recorded=cost or None),  # (read as 0: none recorded)
                retry=is_retry(state=ACTIVE_STATES[state], attempt=attempt),
                due=due,
            )
        )
        spread.append(sigma)
    return running, spread


def _pair_codes(
    org_ids: Sequence[int] | NDArray[np.int64], workflow_ids: Sequence[int] | NDArray[np.int64]
) -> tuple[NDArray[np.intp], list[tuple[int, int]]]:
    """Number the distinct (org, workflow) pairs: the number of each chart's pair, and the pairs.
    Each pair is one integer, org * (largest workflow + 1) + workflow, so numpy sorts plain
    integers; ids too large for that (never in practice) are numbered one pair at a time."""
    if not len(org_ids):
        return np.zeros(0, dtype=np.intp), []
    orgs, workflows = np.asarray(org_ids, dtype=np.int64), np.asarray(workflow_ids, dtype=np.int64)
    width = int(workflows.max()) + 1
    if int(orgs.max()) * width + width > np.iinfo(np.int64).max or min(orgs.min(), workflows.min()) < 0:
        code: dict[tuple[int, int], int] = {}
        pair_of = [code.setdefault(pair, len(code)) for pair in zip(orgs.tolist(), workflows.tolist(), strict=True)]
        return np.array(pair_of, dtype=np.intp), list(code)
    codes = orgs * width + workflows
    if codes.max() <= 4 * len(codes):  # ids as small as usual: a table of every code, no sort
        present = np.zeros(int(codes.max()) + 1, dtype=np.bool_)
        present[codes] = True
        keys, pair_of = np.flatnonzero(present), (np.cumsum(present) - 1)[codes]
    else:
        keys, pair_of = np.unique(codes, return_inverse=True)
    return pair_of.reshape(-1), [(key // width, key % width) for key in keys.tolist()]


def backlogged_and_ready(
    queued: core.QueueColumns, running: list[core.RunningChart], org_rows: dict[str, OrgRow], instant: float
) -> tuple[set[str], set[str]]:
    """The orgs with eligible fair-tier charts waiting (weight > 0, chart not paused, not in the high
    tier), and among them those that can start one now: available now (no backoff, no provider
    pause) and under the org's cap.

    The chart tests run on the queue's arrays; the orgs of the charts that pass are then counted
    once each (`dict.fromkeys`, in C), with no Python step per chart."""
    in_flight = Counter(chart.org for chart in running)
    weighted = {key for key, row in org_rows.items() if not row.held}
    under_cap = {key for key in weighted if (cap := org_rows[key].max_concurrency) is None or in_flight[key] < cap}
    arrays = queued.arrays
    fair_tier = ~(arrays.paused | arrays.high_priority)
    available_now = ~(arrays.available_at > instant)  # NaN (no backoff, no pause) is available now
    backlogged = set(dict.fromkeys(compress(queued.org, fair_tier.tolist()))) & weighted
    ready = set(dict.fromkeys(compress(queued.org, (fair_tier & available_now).tolist()))) & under_cap
    return backlogged, ready


# The history the ETAs are forecast from: this many arrival windows (a submission that old counts
# e^-5 of a new one).
HISTORY_WINDOWS = 5


def recent_history(
    now: datetime, config: SchedulerConfig, org_rows: dict[str, OrgRow], costs: Costs, durations: Durations
) -> core.History | None:
    """The submissions of the last HISTORY_WINDOWS arrival windows, from which the core forecasts
    the arrivals (`scheduling.core.forecast.forecast`; decay: one arrival window). One grouped
    query: per (org, workflow, second of creation), a count; a bulk submission is one row. Held
    orgs are left out (their charts never compete while held); none with a window of 0. History is
    complete from the first chart ever submitted, or from the start of the span if earlier."""
    window = config.arrival_window
    if window <= 0:
        return None
    since = now - timedelta(seconds=HISTORY_WINDOWS * window)
    rows = (
        Chart.objects.filter(created_at__gte=since, created_at__lte=now)
        .annotate(second=Func(Epoch("created_at"), function="FLOOR", output_field=FloatField()))
        .values_list("org_id", "workflow_id", "second")
        .annotate(count=Count("id"))
        .order_by()
    )
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        grouped = cursor.fetchall()
    # What a submission of each (org, workflow) pair is, looked up once per pair: (org key, mean,
    # spread, cost), or None for an org on hold (or gone).
    kinds: dict[tuple[int, int], tuple[str, float, float, int] | None] = {}
    submissions = []
    for org_id, workflow_id, second, count in grouped:
        if (pair := (org_id, workflow_id)) not in kinds:
            row = org_rows.get(org_key(org_id))
            held = row is None or row.held
            kinds[pair] = None if held else (org_key(org_id), *durations.of(*pair), costs.of(*pair))
        if (kind := kinds[pair]) is not None:
            org, avg, spread, cost = kind
            submissions.append(
                core.PastSubmission(org=org, created=second, avg=avg, cost=cost, spread=spread, count=count)
            )
    first = Chart.objects.order_by("created_at").values_list(Epoch("created_at"), flat=True).first()
    start = to_seconds(since) if first is None else max(to_seconds(since), first)
    return core.History(submissions=submissions, since=min(start, to_seconds(now)), decay=window)
