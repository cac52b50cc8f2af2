"""Scenario JSON in, plan JSON out: the checked boundary of the core.

`parse_scenario` checks every field against the contract's table and raises `ScenarioError` with
one line naming the field and the chart or org it belongs to. Queued charts are read straight into
columns (`QueueColumns`), so a large queue never becomes one object per chart. Fields the contract
does not name are ignored. Integers must lie within +-2**53, the range in which JSON numbers are
exact everywhere (RFC 8259, section 6) and the core's float comparisons are exact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import repeat
from typing import Any, cast

import numpy as np

from .model import (
    POLICIES,
    QUEUED_COLUMNS,
    QUEUED_DEFAULTS,
    QUEUED_FIELDS,
    Aging,
    Arrival,
    ChartId,
    ChartValues,
    Column,
    History,
    OrgPolicy,
    PastSubmission,
    Plan,
    Policy,
    QueueColumns,
    RunningChart,
    Scenario,
    record_columns,
    record_defaults,
)

MAX_EXACT_INTEGER = 2**53
RUNNING_COLUMNS, RUNNING_DEFAULTS = record_columns(RunningChart), record_defaults(RunningChart)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]+")
_MISSING: Any = object()


class ScenarioError(ValueError):
    """A scenario that breaks the contract; the message is one line naming the field."""


def parse_scenario(data: object) -> Scenario:
    """The scenario described by `data` (decoded JSON), checked field by field.

    1. The top level is an object; its fields are checked in the contract's order: `now`,
       `budget` (required), `policy`, `quantum`, `aging`, `orgs` (each org's weight and cap),
       `queued` (into columns), `running`, and the extensions' `retry_budget`, `arrivals`,
       `history`, `due_first` (true or false) and each chart's `spread` and `due` (a time on the
       scenario's clock, as `available_at`: any finite number, before `now` for a chart already
       overdue; null or absent for none).
    2. Chart ids are unique across `queued` and `running`.
    """
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario: must be an object, got {_show(data)}")
    now = _number(data.get("now", 0), "now")
    if "budget" not in data:
        raise ScenarioError("budget: required")
    budget = _integer(data["budget"], "budget", minimum=1)
    policy = data.get("policy", "round_robin")
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ScenarioError(f'policy: must be "round_robin" or "deficit", got {_show(policy)}')
    quantum = _number(data.get("quantum", 1), "quantum", positive=True)
    aging = data.get("aging")
    orgs = _orgs(data.get("orgs", {}))
    spread: dict[ChartId, float] = {}  # filled by the charts that give one
    queue = _queue(data.get("queued", []), spread)
    running = _running(data.get("running", []), spread)
    retry_budget = data.get("retry_budget")
    arrivals = _arrivals(data.get("arrivals", []))
    history = data.get("history")
    due_first = data.get("due_first", False)
    if type(due_first) is not bool:
        raise ScenarioError(f"due_first: must be true or false, got {_show(due_first)}")
    scenario = Scenario(
        now=now,
        budget=budget,
        policy=cast(Policy, policy),
        quantum=quantum,
        aging=None if aging is None else _aging(aging),
        orgs=orgs,
        queued=queue,
        running=running,
        retry_budget=None if retry_budget is None else _integer(retry_budget, "retry_budget", minimum=0),
        arrivals=arrivals,
        spread=[spread.get(chart_id, 0.0) for chart_id in queue.id] if spread else [],
        running_spread=[spread.get(chart.id, 0.0) for chart in running] if spread else [],
        history=None if history is None else _history(history, now),
        due_first=due_first,
    )
    _check_unique_ids(queue, running)
    return scenario


def plan_to_json(plan: Plan) -> dict[str, object]:
    """The plan as the contract's JSON object; with the ETA bands too when the scenario asked for
    them (a chart's `spread`, `arrivals` or `history`), and each chart's `late_chance` (null
    without a due time or an ETA) when some chart has a due time."""
    document: dict[str, object] = {
        "order": list(plan.order),
        "start": _plain(plan.start),
        "eta": _plain(plan.eta),
        "org_clear": plan.org_clear,
        "global_clear": plan.global_clear,
    }
    if plan.eta_low is not plan.eta:
        document |= {
            "eta_low": _plain(plan.eta_low),
            "eta_high": _plain(plan.eta_high),
            "org_clear_low": plan.org_clear_low,
            "org_clear_high": plan.org_clear_high,
        }
    if plan.due_times:
        document["late_chance"] = _plain(plan.late_chance)
    return document


def _plain(times: Mapping[ChartId, float | None]) -> dict[ChartId, float | None]:
    return times.as_dict() if isinstance(times, ChartValues) else dict(times)


def _aging(aging: object) -> Aging:
    if not isinstance(aging, dict):
        raise ScenarioError(f"aging: must be an object or absent, got {_show(aging)}")
    for field in ("step", "cap"):
        if field not in aging:
            raise ScenarioError(f"aging.{field}: required")
    return Aging(
        step=_number(aging["step"], "aging.step", positive=True),
        cap=_integer(aging["cap"], "aging.cap", minimum=0),
    )


def _orgs(orgs: object) -> dict[str, OrgPolicy]:
    if not isinstance(orgs, dict):
        raise ScenarioError(f"orgs: must be an object, got {_show(orgs)}")
    policies = {}
    for name, policy in orgs.items():
        where = f"orgs.{name}" if _PLAIN_NAME.fullmatch(name) else f"orgs[{json.dumps(name)}]"
        if not isinstance(policy, dict):
            raise ScenarioError(f"{where}: must be an object, got {_show(policy)}")
        cap = policy.get("max_concurrency")
        served = policy.get("served")
        policies[name] = OrgPolicy(
            weight=_integer(policy.get("weight", 1), f"{where}.weight", minimum=0),
            max_concurrency=None
            if cap is None
            else _integer(cap, f"{where}.max_concurrency", minimum=1, nullable=True),
            served=0.0 if served is None else _non_negative(served, f"{where}.served"),
        )
    return policies


def _org_entry(entry: object, where: str, *, required: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """An object of the extension's lists (arrivals, past submissions): its org, a string, and the
    `required` fields present; else the error naming `where`."""
    if not isinstance(entry, dict):
        raise ScenarioError(f"{where}: must be an object, got {_show(entry)}")
    org = entry.get("org", _MISSING)
    if type(org) is not str:
        raise ScenarioError(f"{where}: org required" if org is _MISSING else f"{where}: org must be a string")
    for field in required:
        if field not in entry:
            raise ScenarioError(f"{where}.{field}: required")
    return entry, org


def _arrivals(arrivals: object) -> list[Arrival]:
    """The extension's expected arrivals: [{"org", "rate" > 0, "until", "avg" > 0, "cost", "spread"}]."""
    if not isinstance(arrivals, list):
        raise ScenarioError(f"arrivals: must be an array, got {_show(arrivals)}")
    expected = []
    for index, arrival in enumerate(arrivals):
        where = f"arrivals[{index}]"
        arrival, org = _org_entry(arrival, where, required=("rate", "until", "avg"))
        expected.append(
            Arrival(
                org=org,
                rate=_number(arrival["rate"], f"{where}.rate", positive=True),
                until=_number(arrival["until"], f"{where}.until"),
                avg=_number(arrival["avg"], f"{where}.avg", positive=True),
                cost=_integer(arrival.get("cost", 1), f"{where}.cost", minimum=1),
                spread=_non_negative(arrival.get("spread", 0), f"{where}.spread"),
            )
        )
    return expected


def _history(history: object, now: float) -> History:
    """The extension's history: {"since", "decay" > 0, "submissions": [{"org", "created", "avg" > 0,
    "cost", "spread", "count"}]}; `since` defaults to the earliest submission (or `now`)."""
    if not isinstance(history, dict):
        raise ScenarioError(f"history: must be an object or absent, got {_show(history)}")
    submissions = history.get("submissions", [])
    if not isinstance(submissions, list):
        raise ScenarioError(f"history.submissions: must be an array, got {_show(submissions)}")
    past = []
    for index, submission in enumerate(submissions):
        where = f"history.submissions[{index}]"
        submission, org = _org_entry(submission, where, required=("created", "avg"))
        past.append(
            PastSubmission(
                org=org,
                created=_number(submission["created"], f"{where}.created"),
                avg=_number(submission["avg"], f"{where}.avg", positive=True),
                cost=_integer(submission.get("cost", 1), f"{where}.cost", minimum=1),
                spread=_non_negative(submission.get("spread", 0), f"{where}.spread"),
                count=_integer(submission.get("count", 1), f"{where}.count", minimum=1),
            )
        )
    since = history.get("since")
    return History(
        submissions=past,
        since=min([now, *(s.created for s in past)]) if since is None else _number(since, "history.since"),
        decay=_number(history.get("decay", 600), "history.decay", positive=True),
    )


def _chart_spread(chart: dict[str, Any], where: _ChartPlace, spread: dict[ChartId, float]) -> None:
    """The extension's `spread` of a chart that gives one (log-sigma of duration, >= 0), into `spread`."""
    value = chart.get("spread")
    if value is None:
        return
    if (type(value) is float or type(value) is int) and _is_number(value, False) and value >= 0:
        spread[chart["id"]] = value
        return
    raise ScenarioError(f"{where}: spread must be a number >= 0, got {_show(value)}")


def _queue(charts: object, spread: dict[ChartId, float]) -> QueueColumns:
    """The queued charts as columns, each chart checked (see the contract's table); their spreads
    go into `spread`.

    1. Read and check whole columns at once (`_queue_by_columns`): the usual input, every value
       plainly good, passes in a few passes over the charts, in C.
    2. If any value may break the contract, read chart by chart (`_queue_by_chart`), which names
       the first chart and field that does (or, for a value the columns' checks leave to it, such
       as a float beyond +-2**53, accepts it): the same columns or the same message either way.
    """
    if not isinstance(charts, list):
        raise ScenarioError(f"queued: must be an array, got {_show(charts)}")
    queue = _queue_by_columns(charts, spread)
    return _queue_by_chart(charts, spread) if queue is None else queue


def _queue_by_columns(charts: list[Any], spread: dict[ChartId, float]) -> QueueColumns | None:
    """The columns of `charts` when every value is plainly good (`_plainly_good`, and each `spread`
    a number >= 0 below 2**53), else None (and `spread` untouched)."""
    if not _all_of(charts, dict):
        return None
    columns: dict[str, list[Any]] = {
        name: list(map(dict.get, charts, repeat(name), repeat(QUEUED_DEFAULTS[name]))) for name in QUEUED_FIELDS
    }
    spreads: list[Any] = list(map(dict.get, charts, repeat("spread")))
    if not (
        all(_plainly_good(columns[name], column) for name, column in QUEUED_COLUMNS.items())
        and _plain_numbers(given := _given(spreads))
        and (not given or min(given) >= 0)
    ):
        return None
    if given:
        spread.update(
            (chart_id, value) for chart_id, value in zip(columns["id"], spreads, strict=True) if value is not None
        )
    return QueueColumns(**columns)


def _plainly_good(values: list[Any], column: Column) -> bool:
    """Whether every value plainly keeps its column's rule: keys and names strings, flags booleans;
    numbers ints or floats below 2**53 in magnitude (durations > 0), integers ints within +-2**53
    (units >= 1); a value an optional column leaves out (None) aside."""
    rule, values = column.rule, _given(values) if column.optional else values
    if rule in ("key", "name"):
        return _all_of(values, str)
    if rule == "flag":
        return _all_of(values, bool)
    if rule in ("number", "duration"):
        return _plain_numbers(values, positive=rule == "duration")
    return _plain_integers(values, minimum=1 if rule == "units" else -MAX_EXACT_INTEGER)


def _given(values: list[Any]) -> list[Any]:
    """The values that are not None (most often none: counted in C first)."""
    return [] if values.count(None) == len(values) else [value for value in values if value is not None]


def _all_of(values: list[Any], kind: type) -> bool:
    """Whether every value is of type `kind` itself (a bool is no int)."""
    return set(map(type, values)) <= {kind}


def _plain_numbers(values: list[Any], *, positive: bool = False) -> bool:
    """Whether every value is an int or float of magnitude below 2**53 (so finite), and > 0 if
    `positive`."""
    if not set(map(type, values)) <= {int, float}:
        return False
    try:
        numbers = np.array(values, dtype=np.float64)
    except OverflowError:  # an int beyond any float
        return False
    if not (np.abs(numbers) < MAX_EXACT_INTEGER).all():  # nan compares false
        return False
    return not positive or bool((numbers > 0).all())


def _plain_integers(values: list[Any], *, minimum: int) -> bool:
    """Whether every value is an int from `minimum` to 2**53."""
    return _all_of(values, int) and (not values or (min(values) >= minimum and max(values) <= MAX_EXACT_INTEGER))


def _queue_by_chart(charts: list[Any], spread: dict[ChartId, float]) -> QueueColumns:
    """The queued charts as columns, checked one by one: the first value that breaks the contract
    raises `ScenarioError` naming its chart and field."""
    columns: dict[str, list[Any]] = {name: [] for name in QUEUED_FIELDS}
    for index, chart in enumerate(charts):
        where, fields = _chart("queued", index, chart)
        for name, column in QUEUED_COLUMNS.items():
            columns[name].append(_chart_value(fields, name, column, QUEUED_DEFAULTS[name], where))
        _chart_spread(fields, where, spread)
    return QueueColumns(**columns)


def _chart_value(chart: dict[str, Any], name: str, column: Column, default: Any, where: _ChartPlace) -> Any:
    """The field `name` of a chart (else `default`), checked by its column's rule (the id and org
    by `_chart`)."""
    rule = column.rule
    if rule in ("key", "name"):
        return chart[name]
    if column.optional and chart.get(name) is None:
        return None
    if rule == "flag":
        return _chart_flag(chart, name, where)
    if rule in ("number", "duration"):
        return _chart_number(chart, name, where, positive=rule == "duration")
    minimum = 1 if rule == "units" else None
    return _chart_integer(chart, name, where, default=default, minimum=minimum)


def _running(charts: object, spread: dict[ChartId, float]) -> list[RunningChart]:
    if not isinstance(charts, list):
        raise ScenarioError(f"running: must be an array, got {_show(charts)}")
    running = []
    for index, chart in enumerate(charts):
        where, fields = _chart("running", index, chart)
        values = {
            name: _chart_value(fields, name, column, RUNNING_DEFAULTS[name], where)
            for name, column in RUNNING_COLUMNS.items()
        }
        running.append(RunningChart(**values))
        _chart_spread(fields, where, spread)
    return running


def _chart(section: str, index: int, chart: object) -> tuple[_ChartPlace, dict[str, Any]]:
    """Check that `chart` is an object with a string id and org; its place for messages."""
    if type(chart) is not dict:
        raise ScenarioError(f"{section}[{index}]: must be an object, got {_show(chart)}")
    chart_id = chart.get("id", _MISSING)
    if type(chart_id) is not str:
        if chart_id is _MISSING:
            raise ScenarioError(f"{section}[{index}]: id required")
        raise ScenarioError(f"{section}[{index}]: id must be a string, got {_show(chart_id)}")
    where = _ChartPlace(section, index, chart_id)
    org = chart.get("org", _MISSING)
    if type(org) is not str:
        if org is _MISSING:
            raise ScenarioError(f"{where}: org required")
        raise ScenarioError(f"{where}: org must be a string, got {_show(org)}")
    return where, chart


class _ChartPlace:
    """Where a chart sits in the scenario, spelled out only when a message needs it."""

    __slots__ = ("chart_id", "index", "section")

    def __init__(self, section: str, index: int, chart_id: str) -> None:
        self.section = section
        self.index = index
        self.chart_id = chart_id

    def __str__(self) -> str:
        return f"{self.section}[{self.index}] (id {json.dumps(self.chart_id)})"


def _chart_number(chart: dict[str, Any], field: str, where: _ChartPlace, *, positive: bool = False) -> float:
    value = chart.get(field, _MISSING)
    if (type(value) is float or type(value) is int) and _is_number(value, positive):
        return value
    if value is _MISSING:
        raise ScenarioError(f"{where}: {field} required")
    raise ScenarioError(f"{where}: {field} {_number_rule(value, positive)}, got {_show(value)}")


def _chart_integer(
    chart: dict[str, Any],
    field: str,
    where: _ChartPlace,
    *,
    default: int,
    minimum: int | None = None,
) -> int:
    value = chart.get(field, default)
    if type(value) is int and _is_integer(value, minimum):
        return value
    raise ScenarioError(f"{where}: {field} {_integer_rule(value, minimum)}, got {_show(value)}")


def _chart_flag(chart: dict[str, Any], field: str, where: _ChartPlace) -> bool:
    value = chart.get(field, False)
    if type(value) is bool:
        return value
    raise ScenarioError(f"{where}: {field} must be true or false, got {_show(value)}")


def _non_negative(value: object, where: str) -> float:
    number = _number(value, where)
    if number < 0:
        raise ScenarioError(f"{where}: must be a number >= 0, got {_show(value)}")
    return number


def _number(value: object, where: str, *, positive: bool = False) -> float:
    if (type(value) is float or type(value) is int) and _is_number(value, positive):
        return value
    raise ScenarioError(f"{where}: {_number_rule(value, positive)}, got {_show(value)}")


def _integer(value: object, where: str, *, minimum: int, nullable: bool = False) -> int:
    if type(value) is int and _is_integer(value, minimum):
        return value
    rule = _integer_rule(value, minimum) + (" or null" if nullable else "")
    raise ScenarioError(f"{where}: {rule}, got {_show(value)}")


def _is_number(value: float, positive: bool) -> bool:
    """Whether an int or float `value` is finite, within range, and positive if it must be."""
    # value - value is nan for inf and nan, 0 for any finite float.
    finite = -MAX_EXACT_INTEGER <= value <= MAX_EXACT_INTEGER if type(value) is int else value - value == 0
    return finite and (value > 0 or not positive)


def _is_integer(value: int, minimum: int | None) -> bool:
    lowest = -MAX_EXACT_INTEGER if minimum is None else minimum
    return lowest <= value <= MAX_EXACT_INTEGER


def _too_large(value: object) -> bool:
    return type(value) is int and abs(value) > MAX_EXACT_INTEGER


def _number_rule(value: object, positive: bool) -> str:
    rule = "must be a number > 0" if positive else "must be a finite number"
    return rule + (f" within +-{MAX_EXACT_INTEGER}" if _too_large(value) else "")


def _integer_rule(value: object, minimum: int | None) -> str:
    rule = "must be an integer" if minimum is None else f"must be an integer >= {minimum}"
    return rule + (f" within +-{MAX_EXACT_INTEGER}" if _too_large(value) else "")


def _check_unique_ids(queue: QueueColumns, running: list[RunningChart]) -> None:
    places = [*(f"queued[{index}]" for index in range(len(queue))), *(f"running[{i}]" for i in range(len(running)))]
    first_place: dict[ChartId, str] = {}
    for place, chart_id in zip(places, [*queue.id, *(chart.id for chart in running)], strict=True):
        if chart_id in first_place:
            raise ScenarioError(f"{place} (id {json.dumps(chart_id)}): duplicate id, also {first_place[chart_id]}")
        first_place[chart_id] = place


def _show(value: object) -> str:
    """A short JSON rendering of `value` for a message."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."
