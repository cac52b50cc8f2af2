"""The figures of a load run, computed from its event log (plain data in, plain data out).

Two families:
- **fairness** (`fairness`), on a `Schedule` (when each chart arrived, became eligible, started and
  finished): per org the wait for its first start, queue age at start (p50/p95); the weighted Jain
  index of started cost units over saturated windows; for each small org that arrives, whether its
  first chart started within one round and its share of the next 20 starts. The live run and every
  baseline replay are turned into a `Schedule` so that all are measured the same way.
- **the live record** (`live_figures`): ETA error at enqueue and at start against the actual finish,
  next to the naive formula; p10-p90 band coverage; the budget replayed from the transitions; nothing
  lost or run twice (one terminal state per chart, Temporal agreeing with the database); each fault
  with its recovery time.

Times are seconds from the run's first submission. A "start" is a chart's first dispatch (its claim):
that is when the scheduler gave it a slot.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TERMINAL = ("succeeded", "failed", "cancelled")
IN_FLIGHT = ("dispatching", "running")
NEXT_STARTS = 20
WINDOW_SECONDS = 15.0
SATURATED_SHARE = 0.9
FAILED_RUN_STATUSES = ("failed", "terminated", "timed_out", "canceled")


def quantile(values: Iterable[float], q: float) -> float | None:
    """The q-quantile with linear interpolation between order statistics (None when empty)."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def weighted_jain(units: Mapping[str, float], weights: Mapping[str, int]) -> float | None:
    """Jain's index of x_i = units_i / weight_i: 1 when every org got exactly its weight's share."""
    shares = [units.get(org, 0.0) / weight for org, weight in weights.items() if weight > 0]
    if not shares or not any(shares):
        return None
    return sum(shares) ** 2 / (len(shares) * sum(x * x for x in shares))


# -- schedules and fairness ------------------------------------------------------------------------


@dataclass(frozen=True)
class ChartRun:
    """One chart in a schedule: `eligible` is when it could first run (arrival, or an org's release).

    `attempts` are the spans in which it held its units, one per run (claim to release); by default
    one, from `start` to `finish`. A chart that failed and was retried held its units once per run.
    """

    id: str
    org: str
    arrival: float
    eligible: float
    start: float | None
    finish: float | None
    cost: int = 1
    attempts: tuple[tuple[float, float | None], ...] = ()

    @property
    def held(self) -> tuple[tuple[float, float | None], ...]:
        """The spans in which the chart held its units."""
        if self.attempts:
            return self.attempts
        return () if self.start is None else ((self.start, self.finish),)


@dataclass(frozen=True)
class Schedule:
    """What happened to every chart under one policy, with the levers the metrics need."""

    name: str
    charts: list[ChartRun]
    budget: int
    weights: dict[str, int]
    kinds: dict[str, str]
    blackouts: list[tuple[str, float, float]] = field(default_factory=list)

    def blocked(self, org: str, at: float) -> bool:
        return any(o == org and start <= at < end for o, start, end in self.blackouts)


@dataclass
class OrgFairness:
    org: str
    kind: str
    weight: int
    charts: int
    first_wait: float | None
    age_p50: float | None
    age_p95: float | None


@dataclass
class Newcomer:
    org: str
    arrival: float
    first_wait: float | None
    others_before: int
    round_size: int
    within_round: bool
    share_next: float
    fair_share_next: float


@dataclass
class Window:
    """A saturated window: Jain's index of cost units started, and of unit-seconds held, per weight."""

    start: float
    jain: float | None
    orgs: list[str]
    jain_held: float | None = None


@dataclass
class Fairness:
    name: str
    orgs: list[OrgFairness]
    windows: list[Window]
    newcomers: list[Newcomer]

    @property
    def jain_values(self) -> list[float]:
        return [w.jain for w in self.windows if w.jain is not None]

    @property
    def jain_mean(self) -> float | None:
        values = self.jain_values
        return sum(values) / len(values) if values else None

    @property
    def jain_held_values(self) -> list[float]:
        return [w.jain_held for w in self.windows if w.jain_held is not None]

    @property
    def jain_held_mean(self) -> float | None:
        values = self.jain_held_values
        return sum(values) / len(values) if values else None


def fairness(schedule: Schedule, *, window: float = WINDOW_SECONDS) -> Fairness:
    """Per-org waits, Jain over saturated windows, and how newcomers fared (see the module doc)."""
    return Fairness(
        name=schedule.name,
        orgs=_org_fairness(schedule),
        windows=saturated_windows(schedule, window=window),
        newcomers=newcomers(schedule),
    )


def _org_fairness(schedule: Schedule) -> list[OrgFairness]:
    by_org: dict[str, list[ChartRun]] = defaultdict(list)
    for chart in schedule.charts:
        by_org[chart.org].append(chart)
    figures = []
    for org, charts in sorted(by_org.items()):
        first = min(charts, key=lambda c: (c.eligible, c.id))
        ages = [c.start - c.eligible for c in charts if c.start is not None]
        figures.append(
            OrgFairness(
                org=org,
                kind=schedule.kinds.get(org, ""),
                weight=schedule.weights.get(org, 1),
                charts=len(charts),
                first_wait=None if first.start is None else first.start - first.eligible,
                age_p50=quantile(ages, 0.5),
                age_p95=quantile(ages, 0.95),
            )
        )
    return figures


def waiting_counts(schedule: Schedule) -> dict[str, list[tuple[float, int]]]:
    """Per org, its count of waiting charts (eligible, not yet started) as steps (time, count)."""
    changes: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for chart in schedule.charts:
        changes[chart.org].append((chart.eligible, 1))
        changes[chart.org].append((chart.start if chart.start is not None else math.inf, -1))
    steps: dict[str, list[tuple[float, int]]] = {}
    for org, deltas in changes.items():
        deltas.sort(key=lambda d: (d[0], d[1]))
        count, org_steps = 0, [(-math.inf, 0)]
        for at, delta in deltas:
            count += delta
            org_steps.append((at, count))
        steps[org] = org_steps
    return steps


def _count_at(steps: list[tuple[float, int]], at: float) -> int:
    count = 0
    for time, value in steps:
        if time > at:
            break
        count = value
    return count


def _min_over(steps: list[tuple[float, int]], start: float, end: float) -> int:
    lowest = _count_at(steps, start)
    for time, value in steps:
        if start < time < end:
            lowest = min(lowest, value)
    return lowest


def in_flight_units(schedule: Schedule) -> list[tuple[float, int]]:
    """Cost units in flight as steps (time, units), each chart for each span it held them."""
    deltas: list[tuple[float, int]] = []
    for chart in schedule.charts:
        units = min(chart.cost, schedule.budget)
        for start, finish in chart.held:
            deltas.append((start, units))
            deltas.append((finish if finish is not None else math.inf, -units))
    deltas.sort(key=lambda d: (d[0], d[1]))
    steps, units = [(-math.inf, 0)], 0
    for at, delta in deltas:
        units += delta
        steps.append((at, units))
    return steps


def _busy_share(steps: list[tuple[float, int]], start: float, end: float, threshold: int) -> float:
    """Share of [start, end) during which the step function is at or above `threshold`."""
    busy = 0.0
    for index, (at, value) in enumerate(steps):
        following = steps[index + 1][0] if index + 1 < len(steps) else math.inf
        left, right = max(at, start), min(following, end)
        if right > left and value >= threshold:
            busy += right - left
    return busy / (end - start)


def saturated_windows(schedule: Schedule, *, window: float = WINDOW_SECONDS) -> list[Window]:
    """Jain's index of cost units per weight over each saturated window: of the units taken in the
    window, and of the unit-seconds held in it (a slow org holds its units longer per start).

    1. Cut the span from the first eligibility to the last start into windows of `window` seconds.
    2. A window is saturated when the pool held at least budget - 1 units for 90% of it and at least
       two orgs were backlogged all through it (an eligible chart waiting, not blocked).
    3. Over those orgs, x_i = cost units taken in the window / weight (and unit-seconds held in the
       window / weight); Jain's index of the x_i. Units are taken at every run's start: a retry
       takes the pool's units again and is charged to its org like any start, so an org whose
       runs fail spends its share on them.
    """
    started = [c for c in schedule.charts if c.start is not None]
    if not started:
        return []
    waiting = waiting_counts(schedule)
    occupancy = in_flight_units(schedule)
    begin = min(c.eligible for c in schedule.charts)
    end = max(c.start for c in started if c.start is not None)
    windows = []
    start = begin
    while start + window <= end:
        stop = start + window
        if _busy_share(occupancy, start, stop, schedule.budget - 1) >= SATURATED_SHARE:
            backlogged = sorted(
                org
                for org, steps in waiting.items()
                if schedule.weights.get(org, 1) > 0
                and _min_over(steps, start, stop) > 0
                and not any(schedule.blocked(org, at) for at in (start, (start + stop) / 2, stop - 1e-9))
            )
            if len(backlogged) >= 2:
                units: dict[str, float] = defaultdict(float)
                held: dict[str, float] = defaultdict(float)
                for chart in started:
                    if chart.org not in backlogged:
                        continue
                    chart_units = min(chart.cost, schedule.budget)
                    for run_start, run_finish in chart.held:
                        if start <= run_start < stop:
                            units[chart.org] += chart_units
                        overlap = min(math.inf if run_finish is None else run_finish, stop) - max(run_start, start)
                        if overlap > 0:
                            held[chart.org] += chart_units * overlap
                weights = {org: schedule.weights.get(org, 1) for org in backlogged}
                windows.append(Window(start, weighted_jain(units, weights), backlogged, weighted_jain(held, weights)))
        start = stop
    return windows


def newcomers(schedule: Schedule) -> list[Newcomer]:
    """How each small org's first chart fared against the backlog it arrived into.

    - round size: the sum of the weights of the orgs backlogged when it arrived (itself included);
      it started within one round if at most that many charts of other orgs started before its
      first start (of any of its charts: due first may start a later one of its burst first);
    - share of the next 20 starts after its arrival (fewer if fewer followed), next to its fair
      share: its weight over the backlogged weights, capped by the charts it had waiting.
    """
    waiting = waiting_counts(schedule)
    starts = sorted((c.start, c.id, c.org) for c in schedule.charts if c.start is not None)
    figures = []
    for org in sorted(o for o, kind in schedule.kinds.items() if kind == "small"):
        charts = sorted((c for c in schedule.charts if c.org == org), key=lambda c: (c.eligible, c.id))
        if not charts:
            continue
        first = charts[0]
        arrival = first.eligible
        first_start = min((c.start for c in charts if c.start is not None), default=None)
        backlogged = {
            other
            for other, steps in waiting.items()
            if other != org and _count_at(steps, arrival) > 0 and not schedule.blocked(other, arrival)
        }
        round_size = schedule.weights.get(org, 1) + sum(schedule.weights.get(o, 1) for o in backlogged)
        if first_start is None:
            others_before = sum(1 for at, _, o in starts if at >= arrival and o != org)
        else:
            others_before = sum(1 for at, _, o in starts if arrival <= at < first_start and o != org)
        following = [o for at, _, o in starts if at >= arrival][:NEXT_STARTS]
        span = len(following) or NEXT_STARTS
        burst = sum(1 for c in charts if c.eligible <= arrival + 1e-6)
        fair = min(burst, span * schedule.weights.get(org, 1) / round_size) / span
        figures.append(
            Newcomer(
                org=org,
                arrival=arrival,
                first_wait=None if first_start is None else first_start - arrival,
                others_before=others_before,
                round_size=round_size,
                within_round=first_start is not None and others_before <= round_size,
                share_next=following.count(org) / span,
                fair_share_next=fair,
            )
        )
    return figures


# -- the live record -------------------------------------------------------------------------------


def blackouts_of(log: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(org, start, end) windows in which an org could not run: its holds and its provider's pauses."""
    ended = float(log["meta"]["ended"])
    windows = [(h["org"], float(h["start"]), float(h["end"] if h["end"] is not None else ended)) for h in log["holds"]]
    for pause in log["pauses"]:
        windows += [(org, float(pause["start"]), float(pause["end"])) for org in pause["orgs"]]
    return windows


def held_spans(log: Mapping[str, Any]) -> dict[int, list[tuple[float, float | None]]]:
    """Each chart's spans holding units: from each claim to the transition that left flight."""
    spans: dict[int, list[tuple[float, float | None]]] = defaultdict(list)
    for chart_id, at, from_state, to_state in log["transitions"]:
        if to_state == "dispatching":
            spans[chart_id].append((at, None))
        elif from_state in IN_FLIGHT and to_state not in IN_FLIGHT and spans[chart_id]:
            claimed, _ = spans[chart_id][-1]
            spans[chart_id][-1] = (claimed, at)
    return spans


def live_schedule(log: Mapping[str, Any]) -> Schedule:
    """The live run as a `Schedule`: start = first dispatch, finish = the final finish."""
    blackouts = blackouts_of(log)
    holds = {(org, start): end for org, start, end in blackouts if any(h["org"] == org for h in log["holds"])}
    attempts = held_spans(log)
    charts = []
    for chart in log["charts"]:
        eligible = chart["submitted"]
        for (org, start), end in holds.items():
            if org == chart["org"] and start <= eligible < end:
                eligible = end
        charts.append(
            ChartRun(
                id=str(chart["id"]),
                org=chart["org"],
                arrival=chart["submitted"],
                eligible=eligible,
                start=attempts[chart["id"]][0][0] if attempts.get(chart["id"]) else None,
                finish=chart["finished"],
                cost=chart["cost"],
                attempts=tuple(attempts.get(chart["id"], ())),
            )
        )
    return Schedule(
        name="fairsched (live)",
        charts=charts,
        budget=int(log["meta"]["budget"]),
        weights={org["slug"]: org["weight"] for org in log["orgs"]},
        kinds={org["slug"]: org["kind"] for org in log["orgs"]},
        blackouts=blackouts,
    )


def due_times(log: Mapping[str, Any]) -> dict[str, float]:
    """Each chart's due time (by id): its submission + its own promise (`due_in`), else + its org's
    turnaround target; a chart with neither has none."""
    targets = {org["slug"]: org.get("turnaround") for org in log["orgs"]}
    due = {}
    for chart in log["charts"]:
        promise = chart.get("due_in")
        promise = targets.get(chart["org"]) if promise is None else promise
        if promise is not None:
            due[str(chart["id"])] = chart["submitted"] + promise
    return due


@dataclass(frozen=True)
class Promises:
    """The promises an attainment judges (`promises`): each counted chart's due time, by id, and
    those of them that failed."""

    due: dict[str, float]
    failed: frozenset[str]


def promises(log: Mapping[str, Any]) -> Promises:
    """The promises of the run: every chart with a due time (`due_times`) that ended by the system's
    doing or has not ended; a chart cancelled was withdrawn by its customer, with no promise left to
    keep, and is not counted. A chart that failed missed its promise (the result promised never
    came), in every schedule alike: the same charts are judged in the live run and every replay."""
    due = due_times(log)
    state = {str(chart["id"]): chart["state"] for chart in log["charts"]}
    counted = {chart_id: at for chart_id, at in due.items() if state[chart_id] != "cancelled"}
    return Promises(counted, frozenset(chart_id for chart_id in counted if state[chart_id] == "failed"))


@dataclass(frozen=True)
class Attainment:
    """How many of each org's promised charts kept their promise (a chart that never finished, or
    failed, did not), and the share over every org."""

    met: dict[str, int]
    charts: dict[str, int]

    def of(self, org: str) -> float | None:
        return self.met[org] / self.charts[org] if self.charts.get(org) else None

    @property
    def overall(self) -> float | None:
        total = sum(self.charts.values())
        return sum(self.met.values()) / total if total else None


def attainment(schedule: Schedule, promised: Promises) -> Attainment:
    """The turnaround attainment of `schedule`: a promised chart kept its promise when it finished by
    its due time and did not fail."""
    met: dict[str, int] = defaultdict(int)
    charts: dict[str, int] = defaultdict(int)
    for chart in schedule.charts:
        due = promised.due.get(chart.id)
        if due is not None:
            charts[chart.org] += 1
            met[chart.org] += chart.id not in promised.failed and chart.finish is not None and chart.finish <= due
    return Attainment(dict(met), dict(charts))


@dataclass
class ErrorFigures:
    """Absolute relative errors: how many, median, p90; `bias` is the median signed error
    (positive: the prediction was late, pessimistic)."""

    count: int
    median: float | None
    p90: float | None
    bias: float | None = None


def error_figures(signed: Sequence[float]) -> ErrorFigures:
    errors = [abs(error) for error in signed]
    return ErrorFigures(len(errors), quantile(errors, 0.5), quantile(errors, 0.9), quantile(signed, 0.5))


@dataclass
class EtaFigures:
    """ETA errors (absolute, relative to the time left until the actual finish) and band coverage."""

    at_enqueue: ErrorFigures
    naive_at_enqueue: ErrorFigures
    at_start: ErrorFigures
    band_enqueue: float | None
    band_start: float | None
    first_attempt_enqueue: ErrorFigures
    by_org: dict[str, ErrorFigures]
    points: list[tuple[float, float, float, float]]  # (at, actual finish, eta, naive eta) at enqueue
    by_time: list[tuple[float, float, ErrorFigures, float | None]] = field(default_factory=list)
    """(from, to, errors at enqueue, band coverage) for the enqueue ETAs made in [from, to) s of the run."""
    enqueue_deep: ErrorFigures = field(default_factory=lambda: error_figures([]))
    enqueue_shallow: ErrorFigures = field(default_factory=lambda: error_figures([]))
    sampled: ErrorFigures = field(default_factory=lambda: error_figures([]))
    sampled_deep: ErrorFigures = field(default_factory=lambda: error_figures([]))
    sampled_shallow: ErrorFigures = field(default_factory=lambda: error_figures([]))
    band_sampled: float | None = None
    band_width_sampled: float | None = None
    """Median width of the band over the wait, relative to the time left."""
    org_clear: ErrorFigures = field(default_factory=lambda: error_figures([]))
    after_first_tenth: ErrorFigures = field(default_factory=lambda: error_figures([]))
    """Enqueue ETAs made after the first tenth of the submission window."""
    band_enqueue_after_first_tenth: float | None = None
    band_sampled_after_first_tenth: float | None = None
    """Band coverage of the ETAs made after the first tenth, at enqueue and sampled over the wait."""


def naive_eta(log: Mapping[str, Any], at: float) -> float:
    """pending x average / capacity from `at`: pending = cost units of the charts submitted and not
    finished (held orgs' charts excluded while held), average = the mean of the runs that ended
    before `at` (the configured default before any), capacity = the budget."""
    budget = int(log["meta"]["budget"])
    holds = [(h["org"], h["start"], h["end"] if h["end"] is not None else math.inf) for h in log["holds"]]
    pending = 0
    durations = []
    for chart in log["charts"]:
        held = any(org == chart["org"] and start <= at < end for org, start, end in holds)
        finished = chart["finished"]
        if chart["submitted"] <= at and not held and (finished is None or finished > at):
            pending += chart["cost"]
        durations += [
            run["close"] - run["start"]
            for run in chart["runs"]
            if run["close"] is not None and run["start"] is not None and run["close"] <= at
        ]
    average = sum(durations) / len(durations) if durations else float(log["meta"]["default_duration"])
    return at + pending * average / budget


# A chart is deep when its first wait lasted this many mean durations or more.
DEEP_WAITS = 5.0


def eta_figures(log: Mapping[str, Any]) -> EtaFigures:
    """ETA error at enqueue (first ETA written after submission), over the wait (the samples kept
    every few seconds until the first dispatch) and at start (the last one before it), each
    |predicted - actual finish| / (actual finish - time of prediction), split by deep (first wait
    >= DEEP_WAITS mean durations) and shallow; the naive formula at the same instants as the enqueue
    ETAs; share of finishes inside the band; org clear-time error (`org_clear_error`)."""
    enqueue: list[float] = []
    naive: list[float] = []
    start: list[float] = []
    first_attempt: list[float] = []
    inside_enqueue: list[bool] = []
    inside_start: list[bool] = []
    by_org: dict[str, list[float]] = defaultdict(list)
    points = []
    timed: list[tuple[float, float, bool | None]] = []
    by_depth: dict[str, list[float]] = defaultdict(list)
    inside_sampled: list[bool] = []
    sampled_later: list[bool] = []
    first_tenth = 0.1 * float(log["meta"].get("seconds", 0.0))
    widths: list[float] = []
    deep_wait = DEEP_WAITS * float(log["meta"]["default_duration"])
    for chart in log["charts"]:
        finished = chart["finished"]
        if chart["state"] != "succeeded" or finished is None:
            continue
        first_start = next((run["start"] for run in chart["runs"] if run["start"] is not None), chart["started"])
        depth = "deep" if first_start is not None and first_start - chart["submitted"] >= deep_wait else "shallow"
        for sample in chart.get("eta_wait", []):
            if finished > sample["at"]:
                error = (sample["eta"] - finished) / (finished - sample["at"])
                by_depth["sampled"].append(error)
                by_depth[f"sampled {depth}"].append(error)
                if sample["low"] is not None and sample["high"] is not None:
                    inside_sampled.append(sample["low"] <= finished <= sample["high"])
                    if sample["at"] >= first_tenth:
                        sampled_later.append(inside_sampled[-1])
                    widths.append((sample["high"] - sample["low"]) / (finished - sample["at"]))
        sample = chart["eta_enqueue"]
        if sample and finished > sample["at"]:
            error = (sample["eta"] - finished) / (finished - sample["at"])
            by_depth[f"enqueue {depth}"].append(error)
            naive_at = naive_eta(log, sample["at"])
            enqueue.append(error)
            naive.append((naive_at - finished) / (finished - sample["at"]))
            by_org[chart["org"]].append(error)
            if chart["attempt"] == 1:
                first_attempt.append(error)
            inside = None
            if sample["low"] is not None and sample["high"] is not None:
                inside = sample["low"] <= finished <= sample["high"]
                inside_enqueue.append(inside)
            points.append((sample["at"], finished, sample["eta"], naive_at))
            timed.append((sample["at"], error, inside))
        sample = chart["eta_start"]
        if sample and finished > sample["at"]:
            start.append((sample["eta"] - finished) / (finished - sample["at"]))
            if sample["low"] is not None and sample["high"] is not None:
                inside_start.append(sample["low"] <= finished <= sample["high"])
    return EtaFigures(
        at_enqueue=error_figures(enqueue),
        naive_at_enqueue=error_figures(naive),
        at_start=error_figures(start),
        band_enqueue=sum(inside_enqueue) / len(inside_enqueue) if inside_enqueue else None,
        band_start=sum(inside_start) / len(inside_start) if inside_start else None,
        first_attempt_enqueue=error_figures(first_attempt),
        by_org={org: error_figures(errors) for org, errors in sorted(by_org.items())},
        points=points,
        by_time=_by_time(timed, float(log["meta"].get("seconds", 0.0))),
        enqueue_deep=error_figures(by_depth["enqueue deep"]),
        enqueue_shallow=error_figures(by_depth["enqueue shallow"]),
        sampled=error_figures(by_depth["sampled"]),
        sampled_deep=error_figures(by_depth["sampled deep"]),
        sampled_shallow=error_figures(by_depth["sampled shallow"]),
        band_sampled=sum(inside_sampled) / len(inside_sampled) if inside_sampled else None,
        band_width_sampled=quantile(widths, 0.5),
        org_clear=org_clear_error(log),
        after_first_tenth=error_figures([error for at, error, _ in timed if at >= first_tenth]),
        band_enqueue_after_first_tenth=_share([inside for at, _, inside in timed if at >= first_tenth]),
        band_sampled_after_first_tenth=_share(sampled_later),
    )


def _share(flags: Sequence[bool | None]) -> float | None:
    """The share of True among the flags that are not None (None: none)."""
    known = [flag for flag in flags if flag is not None]
    return sum(known) / len(known) if known else None


def org_clear_error(log: Mapping[str, Any]) -> ErrorFigures:
    """Each sampled org clear-time against the actual one: the latest finish of the charts the org
    had submitted and not finished at the sample's time (samples whose charts did not all finish,
    or whose org had none, are left out); error relative to the time left."""
    charts_by_org: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for chart in log["charts"]:
        charts_by_org[chart["org"]].append((chart["submitted"], chart["finished"]))
    errors = []
    for sample in log.get("org_clear", []):
        at = sample["at"]
        present = [finished for submitted, finished in charts_by_org[sample["org"]] if submitted <= at
                   and (finished is None or finished > at)]  # fmt: skip
        if not present or any(finished is None for finished in present):
            continue
        actual = max(finished for finished in present if finished is not None)
        errors.append((sample["clear"] - actual) / (actual - at))
    return error_figures(errors)


def _by_time(
    timed: Sequence[tuple[float, float, bool | None]], seconds: float
) -> list[tuple[float, float, ErrorFigures, float | None]]:
    """Enqueue ETA errors and band coverage by when the prediction was made: the first tenth of the
    submission window (when most orgs have not shown up yet), then by fifths, then after it."""
    if seconds <= 0:
        return []
    edges = [0.0, 0.1 * seconds, 0.3 * seconds, 0.5 * seconds, 0.7 * seconds, 0.9 * seconds, math.inf]
    rows = []
    for start, end in itertools.pairwise(edges):
        errors = [error for at, error, _ in timed if start <= at < end]
        inside = [flag for at, _, flag in timed if start <= at < end and flag is not None]
        if errors:
            rows.append((start, end, error_figures(errors), sum(inside) / len(inside) if inside else None))
    return rows


@dataclass
class BudgetFigures:
    peak: int
    budget: int
    exceeded_at: list[float]
    in_flight: list[tuple[float, int]]


def budget_figures(log: Mapping[str, Any]) -> BudgetFigures:
    """Replay the transitions: a claim takes the chart's cost units, leaving dispatching or running
    for anything but running gives them back; the peak must stay within the budget."""
    cost = {chart["id"]: chart["cost"] for chart in log["charts"]}
    budget = int(log["meta"]["budget"])
    units, peak = 0, 0
    exceeded: list[float] = []
    steps: list[tuple[float, int]] = []
    for chart_id, at, from_state, to_state in log["transitions"]:
        held = min(cost.get(chart_id, 1), budget)
        if to_state == "dispatching":
            units += held
        elif from_state in IN_FLIGHT and to_state not in IN_FLIGHT:
            units -= held
        else:
            continue
        peak = max(peak, units)
        if units > budget:
            exceeded.append(at)
        steps.append((at, units))
    return BudgetFigures(peak, budget, exceeded, steps)


@dataclass
class IntegrityFigures:
    """Nothing lost, nothing run twice, Temporal agreeing with the database."""

    planned: int
    charts: int
    terminal: int
    by_state: dict[str, int]
    not_one_terminal: list[int]
    run_twice: list[int]
    disagreements: list[str]
    runs_described: int
    temporal_unknown: list[str]

    @property
    def lost(self) -> int:
        return self.planned - self.charts + len(self.not_one_terminal)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.run_twice or self.disagreements or self.temporal_unknown)


def integrity_figures(log: Mapping[str, Any]) -> IntegrityFigures:
    """Every submitted chart ends in exactly one terminal state, and Temporal agrees.

    1. Every planned chart is in the database; each has exactly one transition into a terminal
       state, and that is its final state.
    2. Each attempt's workflow is known to Temporal and closed; a succeeded chart has exactly one
       completed run (its last), a failed one none, all earlier runs failed; more than one completed
       run is a chart run twice.
    3. Temporal has no chart workflow that the database does not know.
    """
    terminal_count: dict[int, int] = defaultdict(int)
    for chart_id, _, _, to_state in log["transitions"]:
        if to_state in TERMINAL:
            terminal_count[chart_id] += 1
    by_state: dict[str, int] = defaultdict(int)
    not_one, twice, disagreements = [], [], []
    described = 0
    for chart in log["charts"]:
        by_state[chart["state"]] += 1
        if terminal_count[chart["id"]] != 1 or chart["state"] not in TERMINAL:
            not_one.append(chart["id"])
        statuses = [run["status"] for run in chart["runs"]]
        described += len(statuses)
        completed = statuses.count("completed")
        if completed > 1:
            twice.append(chart["id"])
        label = f"chart {chart['id']} ({chart['org']}/{chart['external_id']}, {chart['state']})"
        if None in statuses:
            disagreements.append(f"{label}: attempt {statuses.index(None) + 1} unknown to Temporal")
        if "running" in statuses:
            disagreements.append(f"{label}: a run is still running in Temporal")
        if any(status not in FAILED_RUN_STATUSES for status in statuses[:-1]):
            disagreements.append(f"{label}: an earlier attempt did not fail: {statuses}")
        if chart["state"] == "succeeded" and (not statuses or statuses[-1] != "completed"):
            disagreements.append(f"{label}: last run is {statuses[-1] if statuses else 'missing'}")
        if chart["state"] == "failed" and (not statuses or statuses[-1] not in FAILED_RUN_STATUSES):
            disagreements.append(f"{label}: last run is {statuses[-1] if statuses else 'missing'}")
    return IntegrityFigures(
        planned=int(log["meta"].get("planned_charts", len(log["charts"]))),
        charts=len(log["charts"]),
        terminal=sum(by_state[state] for state in TERMINAL),
        by_state=dict(by_state),
        not_one_terminal=not_one,
        run_twice=twice,
        disagreements=disagreements,
        runs_described=described,
        temporal_unknown=list(log.get("temporal_unknown_workflows", [])),
    )


@dataclass
class Recovery:
    kind: str
    at: float
    restored: float | None
    first_start: float | None
    pool_full: float | None
    detail: str
    claimed_at_fault: int = 0  # charts caught between claim and start (`dispatching`) when it struck

    @property
    def recovery_seconds(self) -> float | None:
        """From the fault to the first chart started after the service was back."""
        return None if self.first_start is None else self.first_start - self.at


def recoveries(log: Mapping[str, Any]) -> list[Recovery]:
    """Each fault with the first chart start after the service came back, when the pool was full
    again (budget - 1 units or more in flight), and how many charts were claimed but not yet started
    when it struck (the two-phase dispatch's window)."""
    budget = budget_figures(log)
    running_at = sorted(at for _, at, _, to_state in log["transitions"] if to_state == "running")
    figures = []
    for fault in log["faults"]:
        state: dict[int, str] = {}
        for chart_id, at, _, to_state in log["transitions"]:
            if at > fault["at"]:
                break
            state[chart_id] = to_state
        claimed = sum(1 for value in state.values() if value == "dispatching")
        restored = fault["restored"] if fault["restored"] is not None else fault["at"]
        first = next((at for at in running_at if at > restored), None)
        full = next(
            (at for at, units in budget.in_flight if at > restored and units >= budget.budget - 1),
            None,
        )
        figures.append(
            Recovery(fault["kind"], fault["at"], fault["restored"], first, full, fault.get("detail", ""), claimed)
        )
    return figures


# The drift phase is judged on the ETAs made once the changed workflow has run this many times since.
DRIFT_RUNS = 10


@dataclass
class EtaWindow:
    """The ETAs made in [start, end) s of the run: errors and band coverage, at enqueue and
    sampled (over the waits and the runs), of every chart and of the drifting org's alone."""

    name: str
    start: float
    end: float
    enqueue: ErrorFigures
    enqueue_band: float | None
    sampled: ErrorFigures
    sampled_band: float | None
    drifting: ErrorFigures
    drifting_band: float | None


@dataclass
class DriftFigures:
    """The drift phase (`workload.DriftSpec`): the ETAs before the change (after the first tenth),
    from the change until DRIFT_RUNS of the changed runs have finished, and after that."""

    org: str
    workflow: str
    at: float
    factor: float
    learned_at: float | None
    windows: list[EtaWindow]


def drift_figures(log: Mapping[str, Any]) -> DriftFigures | None:
    """The ETAs around the drift phase (None: the run had none)."""
    drift = log["meta"].get("drift")
    if not drift:
        return None
    seconds = float(log["meta"].get("seconds", 0.0))
    changed = sorted(
        chart["finished"]
        for chart in log["charts"]
        if chart["org"] == drift["org"]
        and chart["workflow"] == drift["workflow"]
        and chart["submitted"] >= drift["at"]
        and chart["finished"] is not None
        and chart["state"] == "succeeded"
    )
    learned_at = changed[DRIFT_RUNS - 1] if len(changed) >= DRIFT_RUNS else None
    edges = [
        ("before the change", 0.1 * seconds, float(drift["at"])),
        (f"change to {DRIFT_RUNS} changed runs", float(drift["at"]), learned_at or math.inf),
        (f"after {DRIFT_RUNS} changed runs", learned_at or math.inf, math.inf),
    ]
    return DriftFigures(
        drift["org"],
        drift["workflow"],
        float(drift["at"]),
        float(drift["factor"]),
        learned_at,
        [_eta_window(log, name, start, end, drift["org"]) for name, start, end in edges],
    )


def _eta_window(log: Mapping[str, Any], name: str, start: float, end: float, org: str) -> EtaWindow:
    errors: dict[str, list[float]] = defaultdict(list)
    inside: dict[str, list[bool]] = defaultdict(list)
    for chart in log["charts"]:
        finished = chart["finished"]
        if chart["state"] != "succeeded" or finished is None:
            continue
        places = [("enqueue", chart["eta_enqueue"])] if chart["eta_enqueue"] else []
        places += [("sampled", sample) for sample in [*chart.get("eta_wait", []), *chart.get("eta_run", [])]]
        for place, sample in places:
            if not start <= sample["at"] < end or finished <= sample["at"]:
                continue
            keys = [place, "drifting"] if place == "sampled" and chart["org"] == org else [place]
            for key in keys:
                errors[key].append((sample["eta"] - finished) / (finished - sample["at"]))
                if sample["low"] is not None and sample["high"] is not None:
                    inside[key].append(sample["low"] <= finished <= sample["high"])

    def share(flags: list[bool]) -> float | None:
        return sum(flags) / len(flags) if flags else None

    return EtaWindow(
        name,
        start,
        end,
        error_figures(errors["enqueue"]),
        share(inside["enqueue"]),
        error_figures(errors["sampled"]),
        share(inside["sampled"]),
        error_figures(errors["drifting"]),
        share(inside["drifting"]),
    )


@dataclass
class RunningEtaFigures:
    """The running charts' ETAs: every plan row of a running chart checked at every sample, those
    before the sample's instant (shown as past) kept; and their error and band sampled over the runs."""

    checked: int
    past: list[dict[str, Any]]
    sampled: ErrorFigures
    band: float | None

    @property
    def latest_lag(self) -> float | None:
        """How far in the past the worst of them was, in seconds."""
        return max((sample["at"] - sample["eta"] for sample in self.past), default=None)


def running_eta_figures(log: Mapping[str, Any]) -> RunningEtaFigures:
    checks = log.get("running_etas", {"checked": 0, "past": []})
    errors: list[float] = []
    inside: list[bool] = []
    for chart in log["charts"]:
        finished = chart["finished"]
        if chart["state"] != "succeeded" or finished is None:
            continue
        for sample in chart.get("eta_run", []):
            if finished > sample["at"]:
                errors.append((sample["eta"] - finished) / (finished - sample["at"]))
                if sample["low"] is not None and sample["high"] is not None:
                    inside.append(sample["low"] <= finished <= sample["high"])
    return RunningEtaFigures(
        int(checks["checked"]),
        list(checks["past"]),
        error_figures(errors),
        sum(inside) / len(inside) if inside else None,
    )


@dataclass
class LiveFigures:
    eta: EtaFigures
    budget: BudgetFigures
    integrity: IntegrityFigures
    recoveries: list[Recovery]
    drift: DriftFigures | None = None
    running: RunningEtaFigures | None = None


def live_figures(log: Mapping[str, Any]) -> LiveFigures:
    return LiveFigures(
        eta_figures(log),
        budget_figures(log),
        integrity_figures(log),
        recoveries(log),
        drift_figures(log),
        running_eta_figures(log),
    )


@dataclass
class WebhookFigures:
    """The load run's own receiver against the change feed and the event log.

    `lost`: feed events the endpoint subscribes to never received with a good signature;
    `unkeyed_repeats`: repeats of an event carrying a key not already seen with it (a duplicate the
    receiver could not recognise); `out_of_order`: events first received before one that comes earlier
    in the feed; `feed_only` / `log_only`: the feed and the event log (ChartEvent / OrgChange rows)
    not the same set; `latencies`: commit to first good receipt, seconds."""

    subscribed: int
    receipts: int
    delivered: int
    repeats: int
    bad_signatures: int
    lost: list[str]
    unkeyed_repeats: list[str]
    out_of_order: list[str]
    feed_only: list[str]
    log_only: list[str]
    latencies: list[float]

    @property
    def p50(self) -> float | None:
        return quantile(self.latencies, 0.5)

    @property
    def p95(self) -> float | None:
        return quantile(self.latencies, 0.95)

    @property
    def max(self) -> float | None:
        return max(self.latencies, default=None)

    @property
    def agrees(self) -> bool:
        return not self.feed_only and not self.log_only


def webhook_figures(log: Mapping[str, Any]) -> WebhookFigures | None:
    """The webhook figures of a run that had a receiver (`log["webhooks"]`), else None.

    `log["webhooks"]`: `event_types` (the endpoint's; empty = all), `feed` (the change feed read as
    staff to its end, in order: `id`, `type`, `committed` (epoch s), `row` (what the event log's row is:
    a list naming it), `subscribed` (after the endpoint's first position; default true)), `receipts`
    (in arrival order: `event`, `key`, `received` (epoch s), `signature_ok`), `event_log`
    (the rows of ChartEvent / OrgChange, each as a `row` list).
    """
    hooks = log.get("webhooks")
    if not hooks:
        return None
    types = set(hooks.get("event_types") or ())
    feed = [event for event in hooks["feed"] if event.get("subscribed", True) and (not types or event["type"] in types)]
    position = {event["id"]: index for index, event in enumerate(feed)}
    committed = {event["id"]: float(event["committed"]) for event in feed}
    keys: dict[str, str] = {}
    first: list[str] = []
    latencies: list[float] = []
    unkeyed: list[str] = []
    repeats = bad = 0
    for receipt in hooks["receipts"]:
        event = receipt["event"]
        if not receipt["signature_ok"]:
            bad += 1
            continue
        if event in keys:
            repeats += 1
            if receipt["key"] != keys[event]:
                unkeyed.append(event)
            continue
        keys[event] = receipt["key"]
        first.append(event)
        if event in committed:
            latencies.append(float(receipt["received"]) - committed[event])
    out_of_order, latest = [], -1
    for event in first:
        index = position.get(event)
        if index is None:
            continue
        if index < latest:
            out_of_order.append(event)
        latest = max(latest, index)
    fed = [tuple(event["row"]) for event in hooks["feed"] if event.get("row") is not None]
    logged = [tuple(row) for row in hooks["event_log"]]
    fed_count: dict[tuple[Any, ...], int] = defaultdict(int)
    logged_count: dict[tuple[Any, ...], int] = defaultdict(int)
    for row in fed:
        fed_count[row] += 1
    for row in logged:
        logged_count[row] += 1
    return WebhookFigures(
        subscribed=len(feed),
        receipts=len(hooks["receipts"]),
        delivered=len(first),
        repeats=repeats,
        bad_signatures=bad,
        lost=[event["id"] for event in feed if event["id"] not in keys],
        unkeyed_repeats=unkeyed,
        out_of_order=out_of_order,
        feed_only=[str(row) for row in fed_count if fed_count[row] > logged_count.get(row, 0)],
        log_only=[str(row) for row in logged_count if logged_count[row] > fed_count.get(row, 0)],
        latencies=latencies,
    )
