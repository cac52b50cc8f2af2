"""The forecast from history (`Scenario.history`, `scheduling.core.forecast.forecast`): the core
derives the arrivals it expects from the submissions of the recent past."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from scheduling.core import (
    History,
    OrgPolicy,
    PastSubmission,
    QueueColumns,
    QueuedChart,
    Scenario,
    ScenarioError,
    parse_scenario,
    plan,
    plan_to_json,
)
from scheduling.core.forecast import (
    BURST_AHEAD,
    BURST_SIZE,
    MAX_HORIZON_SHARE,
    MAX_STREAM_LOAD,
    MIN_SPAN_SHARE,
    NEW_ORG_GAPS,
    NEW_ORG_LOAD,
    NEWCOMER_LOAD,
    NEWCOMER_RAMP,
    NEWCOMERS,
    Z90,
    Forecast,
    _unforeseen_spreads,
    expected_charts,
    forecast,
)

DECAY = 600.0


def stream(org: str, *, rate: float, start: float, end: float, avg: float = 10.0) -> list[PastSubmission]:
    """One submission every 1 / rate seconds in [start, end)."""
    count = int((end - start) * rate)
    return [PastSubmission(org, start + index / rate, avg) for index in range(count)]


def backlog(count: int = 40, org: str = "a") -> list[QueuedChart]:
    return [QueuedChart(f"{org}{i:03d}", org, created=i, avg=10.0) for i in range(count)]


@pytest.mark.parametrize("span", [200.0, 600.0, 3000.0])
def test_a_steady_stream_gives_its_rate_whatever_the_span_of_history(span: float) -> None:
    now = 10_000.0
    history = History(stream("b", rate=0.1, start=now - span, end=now), since=now - span, decay=DECAY)
    (arrival,) = forecast(history, now=now, budget=4, backlog=100.0).arrivals
    assert arrival.org == "b"
    assert arrival.rate == pytest.approx(0.1, rel=0.06)


def test_the_rate_decays_with_the_age_of_the_submissions() -> None:
    # b submitted at 0.1/s for an hour and stopped two windows ago: far less than 0.1/s is expected.
    now = 10_000.0
    history = History(stream("b", rate=0.1, start=now - 3600, end=now - 2 * DECAY), since=now - 3600, decay=DECAY)
    (arrival,) = forecast(history, now=now, budget=4, backlog=100.0).arrivals
    assert arrival.rate < 0.1 * math.exp(-2) * 1.2


def test_one_early_submission_is_not_a_rate_of_one_a_second() -> None:
    history = History([PastSubmission("b", 99.0, 10.0)], since=98.0, decay=DECAY)
    (arrival,) = forecast(history, now=100.0, budget=4, backlog=100.0).arrivals
    assert arrival.rate == pytest.approx(1 / (DECAY * -math.expm1(-MIN_SPAN_SHARE)), rel=0.01)


def test_a_bulk_upload_is_a_burst_not_a_rate() -> None:
    now = 1_000.0
    bulk = [PastSubmission("b", 900.0, 10.0, count=BURST_SIZE)]
    quick = [PastSubmission("b", 900.0 + 0.05 * index, 10.0) for index in range(BURST_SIZE)]  # 0.05 s apart
    steady = stream("c", rate=0.05, start=0.0, end=now)
    for submissions in (bulk, quick):
        result = forecast(History([*submissions, *steady], since=0.0, decay=DECAY), now=now, budget=4, backlog=50.0)
        assert [arrival.org for arrival in result.arrivals] == ["c"]
        assert result.burst_rate > 0
        assert result.burst_work == pytest.approx(BURST_SIZE * 10.0)
    # Fewer charts, or as many at a steady one a second, are a rate.
    few = [PastSubmission("b", 900.0, 10.0, count=BURST_SIZE - 1)]
    steady_b = [PastSubmission("b", 900.0 + index, 10.0) for index in range(3 * BURST_SIZE)]
    for submissions in (few, steady_b):
        result = forecast(History(submissions, since=0.0, decay=DECAY), now=now, budget=4, backlog=50.0)
        assert [arrival.org for arrival in result.arrivals] == ["b"]
        assert result.burst_rate == 0


def test_the_arrivals_are_carried_to_the_horizon_of_the_backlog() -> None:
    # The streams take rho of the budget: the backlog of 100 s drains in 100 / (1 - rho) s.
    now = 5_000.0
    history = History(stream("b", rate=0.1, start=0.0, end=now), since=0.0, decay=DECAY)
    result = forecast(history, now=now, budget=4, backlog=100.0)
    rho = sum(a.rate * a.avg for a in result.arrivals) / 4
    assert 0 < rho < MAX_HORIZON_SHARE
    assert result.arrivals[0].until == pytest.approx(now + 100.0 / (1 - rho))
    heavy = History(stream("b", rate=1.0, start=0.0, end=now), since=0.0, decay=DECAY)
    assert forecast(heavy, now=now, budget=4, backlog=100.0).arrivals[0].until == pytest.approx(
        now + 100.0 / (1 - MAX_HORIZON_SHARE)
    )


def test_streams_past_the_budget_are_a_flurry_scaled_down_alike() -> None:
    # b and c submitted 0.4/s and 0.4/s of 10 s charts on 4 lanes: twice what the pool serves.
    now = 3_000.0
    history = History(
        [*stream("b", rate=0.4, start=0, end=now), *stream("c", rate=0.4, start=0, end=now)], since=0.0, decay=DECAY
    )
    b, c = forecast(history, now=now, budget=4, backlog=100.0).arrivals
    assert (b.rate + c.rate) * 10.0 / 4 == pytest.approx(MAX_STREAM_LOAD)
    assert b.rate == pytest.approx(c.rate)


def test_newcomer_risk_fades_as_history_grows() -> None:
    fresh = forecast(History([], since=100.0), now=100.0, budget=4, backlog=10.0)
    known = forecast(History([], since=0.0, decay=10.0), now=100.0, budget=4, backlog=10.0)
    assert fresh.newcomer_load == pytest.approx(NEWCOMER_LOAD * math.exp(-MIN_SPAN_SHARE))
    assert known.newcomer_load < 1e-4


def test_history_plans_as_the_arrivals_it_foresees_stated_directly() -> None:
    # One rule: a scenario with history plans exactly as one that states the forecast's arrivals.
    now = 3_000.0
    rng = random.Random(3)
    submissions = [PastSubmission(rng.choice("bcd"), rng.uniform(0, now), 10.0) for _ in range(300)]
    history = History(submissions, since=0.0, decay=DECAY)
    queued = [*backlog(60), *backlog(20, "b")]
    told = plan(Scenario(now=now, budget=4, queued=queued, history=history))
    backlog_seconds = sum(chart.avg for chart in queued) / 4
    arrivals = forecast(history, now=now, budget=4, backlog=backlog_seconds).arrivals
    stated = plan(Scenario(now=now, budget=4, queued=queued, arrivals=arrivals))
    assert told.order == stated.order
    assert dict(told.eta) == dict(stated.eta)
    # The expected arrivals push the backlog's tail back, and they are never in the plan.
    alone = plan(Scenario(now=now, budget=4, queued=queued))
    assert told.eta["a059"] > alone.eta["a059"]  # type: ignore[operator]
    assert set(told.eta) == set(alone.eta)


def test_thin_history_expects_newcomers_and_widens_the_band() -> None:
    # Nothing seen yet: orgs not seen may come and take their turns; with a long quiet history, no.
    queued = backlog(600)
    spread = [0.3] * len(queued)
    thin = plan(Scenario(now=100.0, budget=4, queued=queued, spread=spread, history=History([], since=100.0)))
    long = plan(Scenario(now=100.0, budget=4, queued=queued, spread=spread, history=History([], since=-1e5)))
    alone = plan(Scenario(now=100.0, budget=4, queued=queued, spread=spread))
    last = "a599"
    assert dict(long.eta) == dict(alone.eta)
    assert thin.eta[last] - 100.0 > (long.eta[last] - 100.0) * 1.3  # type: ignore[operator]
    assert thin.order == long.order  # the newcomers' expected charts are never in the plan
    thin_width = thin.eta_high[last] - thin.eta_low[last]  # type: ignore[operator]
    long_width = long.eta_high[last] - long.eta_low[last]  # type: ignore[operator]
    assert thin_width > 2 * long_width
    assert thin.eta_low[last] < long.eta[last]  # type: ignore[operator]  # none may come after all
    # More may come as well as fewer: with no history the band opens late as far as it opens early
    # (open on one side only, the live run's first ETAs held 3% of their finishes).
    assert thin.eta_high[last] - thin.eta[last] >= thin.eta[last] - thin.eta_low[last]  # type: ignore[operator]


def test_newcomers_come_one_after_another_as_orgs_of_their_own() -> None:
    # The head of a cold backlog runs before orgs not seen yet can have come: it keeps its ETA.
    queued = backlog(600)
    thin = plan(Scenario(now=100.0, budget=4, queued=queued, history=History([], since=100.0)))
    alone = plan(Scenario(now=100.0, budget=4, queued=queued))
    assert thin.eta["a006"] == alone.eta["a006"]
    assert thin.eta["a060"] < alone.eta["a060"] + 30  # type: ignore[operator]
    # With no org seen, k newcomers of NEW_ORG_LOAD each share the newcomers' load, each its own
    # org, coming evenly over NEWCOMER_RAMP decays.
    result = forecast(History([], since=100.0), now=100.0, budget=4, backlog=1e4, typical_avg=10.0)
    newcomers = result.arrivals
    count = math.ceil(result.newcomer_load / NEW_ORG_LOAD)
    assert [arrival.org for arrival in newcomers] == [f"{NEWCOMERS}-{index}" for index in range(count)]
    assert sum(arrival.rate * arrival.avg for arrival in newcomers) / 4 == pytest.approx(result.newcomer_load)
    every = NEWCOMER_RAMP * DECAY / count
    assert [arrival.after for arrival in newcomers] == pytest.approx([(i + 0.5) * every for i in range(count)])
    # Each stream begins when its org comes.
    columns, _ = expected_charts(newcomers[-1:], now=100.0, queued=0)
    assert min(columns.created) == pytest.approx(100.0 + newcomers[-1].after + 0.5 / newcomers[-1].rate)
    assert len(columns) == round(newcomers[-1].rate * (newcomers[-1].until - 100.0 - newcomers[-1].after))


def test_a_new_org_is_measured_from_its_first_submission() -> None:
    # b began 600 s ago at 0.1/s, in a history complete for 3000 s: 0.1/s, not 600 charts over 3000 s.
    now = 10_000.0
    history = History(stream("b", rate=0.1, start=now - 600, end=now), since=now - 3000, decay=DECAY)
    (arrival,) = forecast(history, now=now, budget=4, backlog=100.0).arrivals
    assert arrival.rate == pytest.approx(0.1, rel=0.05)
    # One chart alone is stretched over NEW_ORG_GAPS + 1 gaps, at least MIN_SPAN_SHARE x decay.
    lone = History([PastSubmission("c", now - 200, 10.0)], since=now - 3000, decay=DECAY)
    (arrival,) = forecast(lone, now=now, budget=4, backlog=100.0).arrivals
    seen = 200 * (1 + NEW_ORG_GAPS)
    assert arrival.rate == pytest.approx(math.exp(-200 / DECAY) / (DECAY * -math.expm1(-seen / DECAY)))


@pytest.mark.parametrize(
    "history", [History([], since=100.0), History(stream("b", rate=0.2, start=0, end=100), since=0.0)]
)
def test_the_p10_is_never_earlier_than_if_nothing_more_came(history: History) -> None:
    queued = backlog(200)
    spread = [0.3] * len(queued)
    foreseen = plan(Scenario(now=100.0, budget=4, queued=queued, spread=spread, history=history))
    alone = plan(Scenario(now=100.0, budget=4, queued=queued, spread=spread))
    assert foreseen.eta["a199"] > alone.eta["a199"]  # type: ignore[operator]
    for chart in queued:
        # To within a chart's duration: the replay's lanes are discrete, the bound is not.
        assert foreseen.eta_low[chart.id] >= alone.eta_low[chart.id] - 10.0  # type: ignore[operator]


def test_the_newcomers_share_is_what_the_orgs_seen_leave() -> None:
    now = 300.0
    busy = History(stream("b", rate=0.3, start=0.0, end=now), since=0.0, decay=DECAY)  # 0.75 of 4 lanes
    assert [arrival.org for arrival in forecast(busy, now=now, budget=4, backlog=10.0, typical_avg=10.0).arrivals] == [
        "b"
    ]
    quiet = History(stream("b", rate=0.04, start=0.0, end=now), since=0.0, decay=DECAY)  # 0.1 of the lanes
    result = forecast(quiet, now=now, budget=4, backlog=1e4, typical_avg=10.0)
    b, *newcomers = result.arrivals
    assert b.org == "b"
    rho = 0.04 * 10.0 / 4
    assert result.newcomer_load == pytest.approx((NEWCOMER_LOAD - rho) * math.exp(-now / DECAY), rel=0.1)
    # Each newcomer submits as the org seen does; together they take the newcomers' share.
    each = result.newcomer_load * 4 / 10.0 / len(newcomers)
    assert [arrival.rate for arrival in newcomers] == pytest.approx([each] * len(newcomers))
    assert len(newcomers) == math.ceil(result.newcomer_load / (b.rate * 10.0 / 4))


def _as_one_org(columns: QueueColumns, org: str) -> list[QueuedChart]:
    """The expected charts `columns` as real charts arriving when expected, all of `org`."""
    return [
        QueuedChart(f"~{index}", org, created, float(avg), available_at=created)
        for index, (created, avg) in enumerate(
            zip(np.asarray(columns.created).tolist(), np.asarray(columns.avg).tolist(), strict=True)
        )
    ]


def test_each_expected_newcomer_takes_its_own_turn_under_round_robin() -> None:
    # A cold backfill of 300 charts from an org of weight 3: the newcomers expected are several
    # orgs, so the backfill's ETAs are those of a plan told their charts as real arrivals of that
    # many orgs, each its own turn; as one org they would share one turn for the backfill's three a
    # round, and the backfill's tail would be promised about a third early.
    now, budget = 0.0, 4
    queued = backlog(300)
    orgs = {"a": OrgPolicy(weight=3)}
    history = History([], since=now)
    told = plan(Scenario(now=now, budget=budget, orgs=orgs, queued=queued, history=history))
    result = forecast(history, now=now, budget=budget, backlog=300 * 10.0 / budget, typical_avg=10.0)
    assert len(result.arrivals) > 1
    assert len({arrival.org for arrival in result.arrivals}) == len(result.arrivals)
    charts = [expected_charts([arrival], now=now, queued=0)[0] for arrival in result.arrivals]
    as_orgs = [chart for index, columns in enumerate(charts) for chart in _as_one_org(columns, f"n{index}")]
    as_orgs = [replace(chart, id=f"{chart.org}{chart.id}") for chart in as_orgs]
    each_its_turn = plan(Scenario(now=now, budget=budget, orgs=orgs, queued=[*queued, *as_orgs]))
    merged = expected_charts(result.arrivals, now=now, queued=0)[0]
    one_turn = plan(Scenario(now=now, budget=budget, orgs=orgs, queued=[*queued, *_as_one_org(merged, "n")]))
    alone = plan(Scenario(now=now, budget=budget, orgs=orgs, queued=queued))
    for chart in queued[::10]:
        assert told.eta[chart.id] == each_its_turn.eta[chart.id]
    last = queued[-1].id
    waited = told.eta[last] - now  # type: ignore[operator]
    assert told.eta[last] > alone.eta[last]  # type: ignore[operator]
    # One turn a round for all of them: the tail would be promised over 25% earlier.
    assert one_turn.eta[last] - now < 0.75 * waited  # type: ignore[operator]


def test_newcomers_come_as_often_as_new_orgs_came_lately() -> None:
    # Eight orgs came one every 30 s over the last four minutes: the next newcomers are expected
    # sooner than after a history in which the same orgs were there from the start.
    now = 400.0

    def first_newcomer(start: Callable[[int], float]) -> float:
        orgs = [s for index in range(8) for s in stream(f"o{index}", rate=0.02, start=start(index), end=now)]
        history = History([PastSubmission("a", 0.0, 10.0), *orgs], since=0.0, decay=DECAY)
        result = forecast(history, now=now, budget=4, backlog=1e4, typical_avg=10.0)
        newcomers = [arrival for arrival in result.arrivals if arrival.org.startswith(NEWCOMERS)]
        assert newcomers
        return newcomers[0].after

    assert first_newcomer(lambda index: 160.0 + 30 * index) < 0.8 * first_newcomer(lambda index: 0.0)


def _org_rate(result: Forecast, org: str) -> float:
    return sum(arrival.rate for arrival in result.arrivals if arrival.org == org)


def test_a_young_org_is_forecast_near_what_orgs_usually_do_not_its_first_charts() -> None:
    # Six orgs submit a chart every 100 s; y came 100 s ago and happened to submit 4 charts since:
    # read alone that is ~3x the usual rate, shrunk toward the prior it is near 0.01/s.
    now = 3_000.0
    usual = [s for index in range(6) for s in stream(f"o{index}", rate=0.01, start=0.0, end=now)]
    young = [PastSubmission("y", now - 100 + 25 * index, 10.0) for index in range(4)]
    alone = forecast(History(young, since=0.0, decay=DECAY), now=now, budget=4, backlog=100.0)
    assert _org_rate(alone, "y") > 2.5 * 0.01
    result = forecast(History([*usual, *young], since=0.0, decay=DECAY), now=now, budget=4, backlog=100.0)
    assert 0.01 < _org_rate(result, "y") < 1.5 * 0.01


def test_a_well_known_org_keeps_its_own_rate() -> None:
    # Orgs of rates 0.05 and 0.01/s, seen for an hour: the prior is weak, each keeps its rate.
    now = 3_600.0
    history = History(
        [*stream("big", rate=0.05, start=0.0, end=now), *(s for i in range(5) for s in stream(f"o{i}", rate=0.01,
         start=5.0 * i, end=now))], since=0.0, decay=DECAY,
    )  # fmt: skip
    result = forecast(history, now=now, budget=40, backlog=100.0)
    assert _org_rate(result, "big") == pytest.approx(0.05, rel=0.1)
    assert _org_rate(result, "o0") == pytest.approx(0.01, rel=0.15)


def test_an_org_that_submits_in_bulks_is_forecast_as_bursts_not_a_rate() -> None:
    # bulk uploads 50 charts at once every 10 minutes beside c's steady stream: no stream of bulk's
    # is expected (read as a rate, 50 charts per 600 s would push every ETA back), the bursts come
    # as their size and frequency, and only widen the band's upper side.
    now = 3_000.0
    bulks = [PastSubmission("bulk", 300.0 + 600.0 * index, 10.0, count=50) for index in range(5)]
    steady = stream("c", rate=0.05, start=0.0, end=now)
    history = History([*bulks, *steady], since=0.0, decay=DECAY)
    result = forecast(history, now=now, budget=4, backlog=100.0)
    assert {arrival.org for arrival in result.arrivals} == {"c"}
    assert result.burst_work == pytest.approx(50 * 10.0)
    memory = 5 * DECAY  # BURST_MEMORY decays
    weights = sum(math.exp(-(now - bulk.created) / memory) for bulk in bulks)
    assert result.burst_rate == pytest.approx(weights / (memory * -math.expm1(-now / memory)))
    queued = backlog(40)
    spread = [0.3] * len(queued)
    with_bulks = plan(Scenario(now=now, budget=4, queued=queued, spread=spread, history=history))
    without = plan(Scenario(now=now, budget=4, queued=queued, spread=spread, history=History(steady, since=0.0)))
    last = queued[-1].id
    assert with_bulks.eta[last] == without.eta[last]
    assert with_bulks.eta_low[last] == without.eta_low[last]
    assert with_bulks.eta_high[last] > without.eta_high[last]  # type: ignore[operator]


def test_a_burst_widens_the_upper_side_by_the_share_of_it_that_lands_ahead() -> None:
    # One bulk upload of 600 unit-seconds expected per 600 s, over a wait of 600 s on 4 lanes: its
    # p90 count (1 + Z90 x 1) of which BURST_AHEAD lands before the chart; the lower side is untouched.
    foreseen = Forecast(arrivals=[], evidence=0.0, burst_rate=1 / 600, burst_work=600.0, newcomer_load=0.0)
    start_spread = np.array([0.0, 5.0])
    early, late = _unforeseen_spreads(start_spread, np.array([600.0, 600.0]), foreseen, 4)
    delay = BURST_AHEAD * (1 + Z90) * 600.0 / 4
    assert early.tolist() == [0.0, 5.0]
    assert late.tolist() == pytest.approx([delay, math.hypot(5.0, delay)])


HISTORY: dict[str, Any] = {
    "since": 0,
    "decay": 300,
    "submissions": [
        {"org": "b", "created": 50, "avg": 10},
        {"org": "b", "created": 90, "avg": 10, "cost": 2, "spread": 0.4, "count": 3},
    ],
}


def test_the_plan_command_reads_history_and_prints_the_bands() -> None:
    document = {"now": 100, "budget": 2, "queued": [{"id": "a1", "org": "a", "created": 0, "avg": 10}],
                "history": HISTORY}  # fmt: skip
    scenario = parse_scenario(document)
    assert scenario.history == History(
        [PastSubmission("b", 50, 10), PastSubmission("b", 90, 10, cost=2, spread=0.4, count=3)], since=0, decay=300
    )
    result = subprocess.run(
        [sys.executable, "-m", "scheduling.core", "plan", "-"],
        input=json.dumps(document), capture_output=True, text=True, check=True,
    )  # fmt: skip
    printed = json.loads(result.stdout)
    assert printed == json.loads(json.dumps(plan_to_json(plan(scenario))))
    assert {"eta_low", "eta_high", "org_clear_low", "org_clear_high"} <= printed.keys()


def test_history_since_defaults_to_the_earliest_submission() -> None:
    scenario = parse_scenario({"now": 100, "budget": 1, "history": {"submissions": HISTORY["submissions"]}})
    assert scenario.history is not None
    assert scenario.history.since == 50
    assert scenario.history.decay == 600
    empty = parse_scenario({"now": 100, "budget": 1, "history": {}})
    assert empty.history == History([], since=100, decay=600)


def _submission(**fields: object) -> dict[str, object]:
    return {"submissions": [{"org": "b", "created": 1, "avg": 1} | fields]}


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([], "history: must be an object or absent, got []"),
        ({"submissions": {}}, "history.submissions: must be an array, got {}"),
        ({"since": "x"}, 'history.since: must be a finite number, got "x"'),
        ({"decay": 0}, "history.decay: must be a number > 0, got 0"),
        ({"submissions": [7]}, "history.submissions[0]: must be an object, got 7"),
        ({"submissions": [{"created": 1, "avg": 1}]}, "history.submissions[0]: org required"),
        ({"submissions": [{"org": "b", "avg": 1}]}, "history.submissions[0].created: required"),
        ({"submissions": [{"org": "b", "created": 1}]}, "history.submissions[0].avg: required"),
        (_submission(avg=-1), "history.submissions[0].avg: must be a number > 0, got -1"),
        (_submission(count=0), "history.submissions[0].count: must be an integer >= 1, got 0"),
        (_submission(cost=1.5), "history.submissions[0].cost: must be an integer >= 1, got 1.5"),
        (_submission(spread=-0.1), "history.submissions[0].spread: must be a number >= 0, got -0.1"),
    ],
)  # fmt: skip
def test_bad_history_exits_2_naming_the_field(history: object, message: str) -> None:
    document = {"now": 100, "budget": 1, "history": history}
    with pytest.raises(ScenarioError) as error:
        parse_scenario(document)
    assert str(error.value) == message
    result = subprocess.run(
        [sys.executable, "-m", "scheduling.core", "plan", "-"],
        input=json.dumps(document), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == message
