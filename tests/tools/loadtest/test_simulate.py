"""The open-arrival simulator: its workloads, its schedule over the core and the shell's rules, and
the scores of the predictors on the same charts."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from scheduling.core.durations import DurationState, duration_censored, duration_estimate, duration_learn
from tools.loadtest import simulate
from tools.loadtest.simulate import (
    KINDS,
    Learned,
    SimChart,
    Workload,
)


def _load(workload: Workload, seconds: float) -> float:
    work = sum(chart.duration * min(chart.kind.cost, workload.budget) for chart in workload.charts)
    return work / (workload.budget * seconds)


def test_the_steady_workload_is_poisson_at_load_095() -> None:
    workload = simulate.steady()
    assert 0.85 <= _load(workload, 6000) <= 1.05
    gaps = [b.arrival - a.arrival for a, b in zip(workload.charts, workload.charts[1:], strict=False)]
    assert max(Counter(gaps).values()) < 5  # no bulk: arrivals one at a time


def test_the_bursty_workload_adds_bulk_uploads_of_50_to_300_from_one_org() -> None:
    workload = simulate.bursty()
    assert 0.9 <= _load(workload, 8000) <= 1.2
    bulks = Counter((chart.arrival, chart.org) for chart in workload.charts)
    sizes = [size for size in bulks.values() if size > 1]
    assert len(sizes) >= 4
    assert all(50 <= size <= 300 for size in sizes)
    assert len({(arrival, org) for arrival, org in bulks}) == len({arrival for arrival, _ in bulks})


def test_the_cold_start_is_one_backfill_then_ten_small_orgs_from_the_first_minute() -> None:
    workload = simulate.cold_start()
    at_zero = [chart for chart in workload.charts if chart.arrival == 0]
    assert len(at_zero) == 300
    assert {chart.org for chart in at_zero} == {"backfill"}
    small = {chart.org for chart in workload.charts} - {"backfill"}
    assert len(small) == 10
    assert min(chart.arrival for chart in workload.charts if chart.org in small) >= 60


def test_the_schedule_runs_every_chart_once_within_the_budget() -> None:
    workload = simulate.cold_start()
    schedule = simulate.simulate(workload, policy="deficit", sample_every=120, enqueue_every=10)
    assert set(schedule.start) == set(schedule.finish) == {chart.id for chart in workload.charts}
    edges = []
    for chart in workload.charts:
        assert schedule.start[chart.id] >= chart.arrival
        units = min(chart.kind.cost, workload.budget)
        edges += [(schedule.finish[chart.id], -units), (schedule.start[chart.id], units)]
    held = 0
    for _, units in sorted(edges):  # finishes first at a tie
        held += units
        assert held <= workload.budget


def test_fair_share_holds_between_two_backlogged_orgs() -> None:
    # Two orgs each submit 40 identical charts at 0, weights 2 and 1: while both wait, starts go 2:1.
    charts = [SimChart(f"{org}{i:02d}", org, KINDS[1], 0.0, 60.0) for org in ("a", "b") for i in range(40)]
    workload = Workload("two", budget=3, weights={"a": 2, "b": 1}, charts=charts)
    schedule = simulate.simulate(workload, policy="round_robin", sample_every=600, enqueue_every=80)
    first = sorted(schedule.start, key=lambda chart_id: (schedule.start[chart_id], chart_id))[:30]
    assert Counter(chart_id[0] for chart_id in first) == {"a": 20, "b": 10}


@pytest.fixture(scope="module")
def cold_start_scores() -> dict[str, simulate.Scores]:
    (result,) = simulate.run(["cold_start"], ["round_robin"], scale=0.5)
    return result.scores


def test_the_floor_beats_the_naive_predictors(cold_start_scores: dict[str, simulate.Scores]) -> None:
    floor = cold_start_scores["floor: told every arrival"]
    for name in ("naive: pending x avg / capacity", "queue depth ahead / drain rate", "fairsched"):
        assert floor.sampled.median < cold_start_scores[name].sampled.median  # type: ignore[operator]
    assert floor.band_sampled is None  # only fairsched's predictors give bands


def test_fairsched_is_scored_on_every_figure(cold_start_scores: dict[str, simulate.Scores]) -> None:
    ours = cold_start_scores["fairsched"]
    for errors in (
        ours.enqueue,
        ours.enqueue_deep,
        ours.sampled,
        ours.sampled_deep,
        ours.sampled_shallow,
        ours.org_clear,
    ):
        assert errors.count > 0
    assert ours.band_enqueue is not None
    assert ours.band_sampled is not None
    assert ours.width_sampled is not None
    # The cold start's newcomers widen the band: it holds most finishes even before history exists.
    assert ours.band_enqueue >= 0.7
    before = cold_start_scores["fairsched, one window (before)"]
    assert before.band_enqueue is not None
    assert ours.band_enqueue > before.band_enqueue


def test_the_table_has_a_row_per_predictor_and_the_targets_are_judged() -> None:
    (result,) = simulate.run(["cold_start"], ["deficit"], scale=0.25)
    rows = simulate.table_rows([result])
    assert [row[3] for row in rows] == list(simulate.PREDICTORS)
    assert {row[2] for row in rows} == {"true"}
    assert all(len(row) == len(simulate.TABLE_HEADER) for row in rows)
    judged = simulate.targets([result])
    assert {target.target for target in judged} >= {
        "sampled median <= 1.5x floor",
        "band coverage sampled (running included) 75-90% (median width / time left)",
        "band coverage running 75-90% (median width / time left)",
        "org clear-time band coverage >= 80%",
    }
    assert all(target.workload == "cold_start" for target in judged)


def test_the_org_clear_target_shows_the_floor_it_is_measured_against() -> None:
    (result,) = simulate.run(["cold_start"], ["deficit"], scale=0.25)
    (clear,) = [target for target in simulate.targets([result]) if target.target.startswith("org clear-time median")]
    ours, floor = (result.scores[name].org_clear.median for name in ("fairsched", "floor: told every arrival"))
    assert clear.measured == f"{ours / floor:.2f}x ({ours:.0%}, floor {floor:.0%})"
    assert clear.met == (ours / floor <= 1.3)


def test_the_drift_workload_makes_one_pairs_charts_3x_slower_halfway() -> None:
    workload = simulate.drift()
    change = workload.drift
    assert change is not None
    assert change.at == 3000
    changed = [chart for chart in workload.charts if chart.factor != 1.0]
    assert changed
    assert {(chart.org, chart.kind.name) for chart in changed} == {(change.org, change.kind)}
    assert min(chart.arrival for chart in changed) >= change.at
    # Every chart of the pair submitted from the change on is changed, and none before.
    pair = [chart for chart in workload.charts if (chart.org, chart.kind.name) == (change.org, change.kind)]
    assert all((chart.factor == 3.0) == (chart.arrival >= change.at) for chart in pair)
    assert all(chart.mean == 3 * chart.kind.mean for chart in changed)
    before = [chart.duration for chart in pair if chart.arrival < change.at]
    after = [chart.duration for chart in changed]
    assert 2.2 <= (sum(after) / len(after)) / (sum(before) / len(before)) <= 4.0
    assert 0.7 <= _load(workload, 6000) <= 1.0


def _chart(org: str, kind: int, duration: float, index: int = 0) -> SimChart:
    return SimChart(f"{org}{kind}-{index}", org, KINDS[kind], float(index), duration)


def test_learned_durations_follow_the_cores_rule_with_the_snapshots_fallbacks() -> None:
    learned = Learned()
    # Nothing known: the configured default, and its default spread.
    assert learned.of(_chart("a", 0, 1.0)) == (simulate.DEFAULT_DURATION, simulate.DEFAULT_SPREAD)
    runs = [40.0, 44.0, 38.0, 41.0, 43.0, 39.0]
    state = DurationState()
    for index, seconds in enumerate(runs):
        learned.learn(_chart("a", 0, seconds, index), seconds)
        state = duration_learn(state, seconds)
    # The pair's own estimate is the core's rule fed the same runs (no usual: one pair only).
    assert learned.of(_chart("a", 0, 1.0)) == duration_estimate(state)
    # Another workflow of the same org (run by no other): the org's runs; another org's: the workflow's.
    mean, spread = learned.of(_chart("a", 1, 1.0))
    assert mean == pytest.approx(sum(runs) / len(runs), rel=0.01)
    assert spread == pytest.approx(state.log_sigma)
    assert learned.of(_chart("b", 0, 1.0))[0] == pytest.approx(sum(runs) / len(runs), rel=0.01)
    # A workflow and org never seen: the default duration, with the spread pooled over the pairs.
    unseen_mean, unseen_spread = learned.of(_chart("c", 2, 1.0))
    assert unseen_mean == simulate.DEFAULT_DURATION
    assert unseen_spread == pytest.approx(state.log_sigma)


def test_a_pair_never_run_takes_its_workflows_runs_over_every_org_before_its_orgs_other_workflows() -> None:
    """Found on the steady workload: org00's long charts (120 s) were expected to take its one
    finished medium run's 19.8 s while the long workflow had 15 runs of 106.8 s over the other orgs.
    A workflow's identity says more of a run's length than its org's: the chain asks it first."""
    learned = Learned()
    learned.learn(_chart("a", 1, 20.0), 20.0)
    for index, seconds in enumerate([100.0, 110.0, 105.0]):
        learned.learn(_chart("b", 2, seconds, index), seconds)
    assert learned.of(_chart("a", 2, 1.0))[0] == pytest.approx(105.0, rel=0.01)
    # With no run of its workflow anywhere, the org's runs of its other workflows.
    assert learned.of(_chart("a", 0, 1.0))[0] == pytest.approx(20.0)


def test_learned_durations_count_the_runs_in_flight_as_the_snapshot_does() -> None:
    """A pair's runs in flight count as runs longer than they have lasted (`duration_censored`, as
    `snapshot.Durations.load(lasted=...)`): three finished runs of about 40 s and one that has run
    60 s make the pair's mean longer; once nothing is in flight it is the finished runs' again."""
    learned = Learned()
    for index, seconds in enumerate([40.0, 44.0, 38.0]):
        learned.learn(_chart("a", 0, seconds, index), seconds)
    alone = learned.of(_chart("a", 0, 1.0))
    learned.in_flight([(_chart("a", 0, 1.0, 9), 0.0)], now=60.0)
    state = learned.pairs[("a", "short")]
    counted = duration_censored(state, [60.0], spread=simulate.DEFAULT_SPREAD)
    assert learned.of(_chart("a", 0, 1.0))[0] == pytest.approx(counted.mean_seconds)
    assert counted.mean_seconds > 1.1 * alone[0]
    learned.in_flight([], now=300.0)
    assert learned.of(_chart("a", 0, 1.0)) == alone


def _slow_pair() -> Workload:
    # One org, two lanes, charts of the medium kind (60 s on average) that truly take 180 s: told
    # the truth the predictor knows it at once; learning, it expects the default until runs finish.
    charts = [SimChart(f"c{index:03d}", "a", KINDS[1], 30.0 * index, 180.0, factor=3.0) for index in range(12)]
    return Workload("slow", budget=2, weights={"a": 1}, charts=charts)


def test_running_charts_are_scored_over_their_run_and_counted_in_sampled() -> None:
    schedule = simulate.simulate(_slow_pair(), policy="round_robin", sample_every=45.0, enqueue_every=1)
    scores = simulate.score(schedule, {"fairsched": simulate.fairsched})["fairsched"]
    running_samples = sum(
        1
        for moment in schedule.moments
        if moment.sampled
        for chart, _ in moment.running
        if schedule.finish[chart.id] > moment.at
    )
    assert running_samples > 0
    assert scores.sampled_running.count == running_samples
    assert scores.sampled.count == scores.sampled_deep.count + scores.sampled_shallow.count + running_samples
    assert scores.band_running is not None
    assert scores.width_running is not None
    # The last charts run with nothing waiting: their moments are kept all the same.
    assert any(not moment.waiting and moment.running for moment in schedule.moments)


def test_a_running_charts_eta_is_never_before_the_moment_it_is_made() -> None:
    workload = _slow_pair()
    schedule = simulate.simulate(workload, policy="round_robin", sample_every=45.0, enqueue_every=1)
    seen = 0
    for moment in schedule.moments:
        context = simulate.Context(schedule, moment, workload.charts, [], [], [], Learned().of)
        prediction = simulate.fairsched(context)
        for chart, _ in moment.running:
            assert prediction.eta[chart.id] >= moment.at
            assert prediction.low[chart.id] <= prediction.eta[chart.id] <= prediction.high[chart.id]  # type: ignore[index]
            seen += 1
    assert seen > 0


def test_learned_durations_are_scored_apart_from_the_truth() -> None:
    schedule = simulate.simulate(_slow_pair(), policy="round_robin", sample_every=45.0, enqueue_every=1)
    predictors = {"fairsched": simulate.fairsched}
    told = simulate.score(schedule, predictors, durations="true")["fairsched"]
    learned = simulate.score(schedule, predictors, durations="learned")["fairsched"]
    # Expecting 60 s of runs that take 180 s, the first ETAs are early until runs have finished.
    assert learned.enqueue.bias < told.enqueue.bias - 0.2  # type: ignore[operator]


def test_the_drift_target_compares_the_error_after_ten_changed_runs_with_before() -> None:
    workload = simulate.drift(seconds=3000.0)
    schedule = simulate.simulate(workload, policy="deficit", sample_every=150.0, enqueue_every=40)
    scores = simulate.score(schedule, simulate.PREDICTORS, durations="learned")
    ours = scores["fairsched"]
    assert ours.drift_before.count > 0
    assert ours.drift_after.count > 0
    result = simulate.Result("drift", "deficit", len(workload.charts), 0.0, scores, "learned")
    (drift,) = [target for target in simulate.targets([result]) if target.target.startswith("drift:")]
    assert drift.durations == "learned"
    assert drift.measured.startswith(f"{ours.drift_after.median / ours.drift_before.median:.2f}x")  # type: ignore[operator]


# -- promises: late chances scored, attainment, due first -------------------------------------------


def _promised_pair() -> Workload:
    # Four charts of one org promised at arrival + 100 s (b and d) or + 100 s after a late start (a, c).
    charts = [
        SimChart("a", "x", KINDS[0], 0.0, 80.0, due=100.0),
        SimChart("b", "x", KINDS[0], 0.0, 30.0, due=100.0),
        SimChart("c", "x", KINDS[0], 10.0, 100.0, due=110.0),
        SimChart("d", "x", KINDS[0], 10.0, 30.0, due=110.0),
    ]
    return Workload("hand-made", budget=2, weights={"x": 1}, charts=charts, targets={"x": 100.0})


def _hand_made_schedule() -> simulate.Schedule:
    """a waits 0-40 and finishes at 120 (missed), b starts at once (met), c waits 10-50 and finishes at
    150 (missed), d waits 10-30 (met); moments at both arrivals and at each half wait."""
    workload = _promised_pair()
    a, b, c, d = workload.charts
    schedule = simulate.Schedule(
        workload,
        "round_robin",
        start={"a": 40.0, "b": 0.0, "c": 50.0, "d": 30.0},
        finish={"a": 120.0, "b": 30.0, "c": 150.0, "d": 60.0},
        halfway={"a": 20.0, "b": 0.0, "c": 30.0, "d": 20.0},
    )
    orgs = {"x": simulate.OrgPolicy(weight=1)}
    schedule.moments = [
        simulate.Moment(0.0, (a, b), (), orgs, enqueue=True, sampled=False, halfway=True),
        simulate.Moment(10.0, (a, c, d), ((b, 0.0),), orgs, enqueue=True, sampled=False),
        simulate.Moment(20.0, (a, c, d), ((b, 0.0),), orgs, enqueue=False, sampled=False, halfway=True),
        simulate.Moment(30.0, (a, c, d), (), orgs, enqueue=False, sampled=False, halfway=True),
    ]
    return schedule


# The late chance a made-up predictor gives each chart waiting at each moment of the hand-made schedule.
LATE = {
    0.0: {"a": 0.3, "b": 0.6},  # enqueue: a missed, not predicted; b predicted, met
    10.0: {"a": 0.9, "c": 0.7, "d": 0.1},  # enqueue of c (predicted, missed) and d (neither); a arrived before
    20.0: {"a": 0.8, "c": 0.2, "d": 0.49},  # half wait of a (predicted, missed) and d (just under 0.5, met)
    30.0: {"a": 0.1, "c": 0.9, "d": 0.9},  # half wait of c (predicted, missed); a and d are not at theirs
}


def _told(context: simulate.Context) -> simulate.Prediction:
    return simulate.Prediction({}, late=dict(LATE[context.moment.at]))


def test_the_miss_tally_counts_each_chart_at_its_arrival_and_at_its_half_wait() -> None:
    scores = simulate.score(_hand_made_schedule(), {"fairsched": _told})["fairsched"]
    # At enqueue: a (0.3, missed), b (0.6, met), c (0.7, missed), d (0.1, met).
    assert scores.miss_enqueue == simulate.MissFigures(charts=4, missed=2, predicted=2, hits=1)
    assert scores.miss_enqueue.precision == 0.5
    assert scores.miss_enqueue.recall == 0.5
    # At half the wait: b at 0 (0.6, met), a at 20 (0.8, missed), d at 20 (0.49, met), c at 30 (0.9, missed).
    assert scores.miss_halfway == simulate.MissFigures(charts=4, missed=2, predicted=3, hits=2)
    assert scores.miss_halfway.precision == pytest.approx(2 / 3)
    assert scores.miss_halfway.recall == 1.0


def test_predictors_without_late_chances_are_not_asked_at_the_half_wait_moments() -> None:
    asked: list[float] = []

    def naive(context: simulate.Context) -> simulate.Prediction:
        asked.append(context.moment.at)
        return simulate.Prediction({}, late=dict(LATE[context.moment.at]))

    scores = simulate.score(_hand_made_schedule(), {"naive": naive})["naive"]
    assert asked == [0.0, 10.0]  # the enqueue moments only
    assert scores.miss_halfway.charts == 0  # and its late chances are not scored


def test_no_precision_without_a_prediction_and_no_recall_without_a_miss() -> None:
    none = simulate.MissFigures()
    assert none.precision is None
    assert none.recall is None
    met = none.add(chance=0.2, missed=False)
    assert (met.charts, met.missed, met.predicted, met.hits) == (1, 0, 0, 0)
    assert met.add(chance=0.5, missed=True) == simulate.MissFigures(2, 1, 1, 1)  # 0.5 is "will miss"


def test_attainment_is_the_share_of_each_orgs_charts_finished_by_their_due_time() -> None:
    schedule = _hand_made_schedule()
    assert simulate.attainment(schedule) == {"x": 0.5}
    assert simulate.overall_attainment(schedule) == 0.5


def _small_cold_start() -> tuple[Workload, float, int]:
    workload = simulate.cold_start(seconds=900.0)
    return simulate.promised(workload, sample_every=120.0, enqueue_every=8), 120.0, 8


def test_each_orgs_target_makes_10_to_30_percent_of_its_charts_miss_under_the_fair_order() -> None:
    workload, sample_every, enqueue_every = _small_cold_start()
    assert set(workload.targets) == set(workload.weights)
    assert all(target % simulate.TARGET_STEP == 0 for target in workload.targets.values())
    promises = [(chart.due - chart.arrival) / workload.targets[chart.org] for chart in workload.charts]  # type: ignore[operator]
    assert all(0.5 <= factor <= 1.5 for factor in promises)
    assert max(promises) - min(promises) > 0.9  # each chart's own promise, drawn around its org's target
    plain = simulate.simulate(workload, policy="round_robin", sample_every=sample_every, enqueue_every=enqueue_every)
    met = simulate.attainment(plain)
    # Each org's target is the turnaround 70-90% of its charts reach, rounded up: at most 30% of its
    # charts miss (fewer for an org of few charts), and 10-30% over all.
    assert all(share >= 0.7 for share in met.values())
    overall = simulate.overall_attainment(plain)
    assert overall is not None
    assert 0.7 <= overall <= 0.9
    assert met["backfill"] == pytest.approx(0.7, abs=0.02)  # the first org's share, over 300 charts


def test_the_half_wait_moments_leave_the_schedule_as_it_was() -> None:
    workload, sample_every, enqueue_every = _small_cold_start()
    plain = simulate.simulate(workload, policy="deficit", sample_every=sample_every, enqueue_every=enqueue_every)
    scored = simulate.scored_schedule(
        workload, policy="deficit", sample_every=sample_every, enqueue_every=enqueue_every
    )
    assert scored.start == plain.start
    chosen = {chart.arrival for chart in workload.charts[::enqueue_every]}
    assert set(scored.halfway) == {chart.id for chart in workload.charts if chart.arrival in chosen}
    kept = {moment.at: moment for moment in scored.moments if moment.halfway}
    by_id = {chart.id: chart for chart in workload.charts}
    for chart_id, at in scored.halfway.items():
        assert at == (by_id[chart_id].arrival + plain.start[chart_id]) / 2
        assert by_id[chart_id] in kept[at].waiting


def test_fairsched_and_the_floor_are_scored_on_every_chosen_chart_at_both_moments() -> None:
    workload, sample_every, enqueue_every = _small_cold_start()
    schedule = simulate.scored_schedule(
        workload, policy="round_robin", sample_every=sample_every, enqueue_every=enqueue_every
    )
    scores = simulate.score(schedule, simulate.PREDICTORS)
    chosen = [chart for chart in workload.charts if chart.id in schedule.halfway]
    missed = sum(schedule.finish[chart.id] > (chart.due or 0.0) for chart in chosen)
    for name in simulate.MISS_PREDICTORS:
        for figures in (scores[name].miss_enqueue, scores[name].miss_halfway):
            assert figures.charts == len(schedule.halfway)
            assert figures.missed == missed
    assert scores["naive: pending x avg / capacity"].miss_halfway.charts == 0
    result = simulate.Result("cold_start", "round_robin", len(workload.charts), 0.0, scores)
    rows = simulate.miss_rows([result])
    assert [row[3] for row in rows] == list(simulate.MISS_PREDICTORS)
    assert all(len(row) == len(simulate.MISS_HEADER) for row in rows)
    halfway = scores["fairsched"].miss_halfway
    assert rows[0][-1] == f"{halfway.precision:.0%} / {halfway.recall:.0%} ({halfway.predicted})"
    judged = simulate.miss_targets([result])
    assert [t.target for t in judged] == [
        "will miss at half the wait: precision >= 80%",
        "will miss at half the wait: recall >= 80%",
    ]


def test_due_first_is_set_beside_the_fair_order_with_attainment_and_fairness() -> None:
    results = simulate.orders_run(["cold_start"], ["round_robin"], scale=0.25)
    assert [(r.policy, r.due_first) for r in results] == [("round_robin", False), ("round_robin", True)]
    plain, first = results
    assert set(plain.attainment) == set(plain.targets) == set(simulate.cold_start().weights)
    assert len(plain.fairness.newcomers) == 10  # the ten small orgs
    rows = simulate.order_rows(results)
    assert [row[2] for row in rows] == ["fair order", "due first"]
    assert len(simulate.org_attainment_rows(results)) == len(plain.targets)
    judged = simulate.order_targets(results)
    assert [t.target for t in judged] == [
        "due first raises attainment over the fair order",
        "due first: weighted Jain mean >= 0.95 in saturated windows",
        "due first: every small org's first start within one round",
    ]
    assert judged[0].measured == f"{first.overall:.0%} vs {plain.overall:.0%}"


def _floor_at_the_start(due: float) -> simulate.Prediction:
    """The floor's prediction, at its arrival, of a lone medium chart (mean 60 s, log-sigma 0.6, median
    60 x e^-0.18 = 50.1 s) that starts at once, due `due` seconds later."""
    chart = SimChart("a", "x", KINDS[1], 0.0, 55.0, due=due)
    workload = Workload("one", budget=1, weights={"x": 1}, charts=[chart])
    schedule = simulate.scored_schedule(workload, policy="round_robin", sample_every=600.0, enqueue_every=1)
    (moment,) = schedule.moments
    context = simulate.Context(schedule, moment, [chart], [], [], [0.0])
    return simulate.floor(context)


def test_the_floors_late_chance_is_its_own_durations_tail_after_its_start() -> None:
    # Due at 55 s, between the median (50.1 s) and the mean (60 s): fewer than half of such runs
    # take longer, so the floor, told the chart's true law, does not name it; its ETA stays its mean.
    between = _floor_at_the_start(55.0)
    assert between.eta == {"a": 60.0}
    sigma = KINDS[1].sigma
    z = (math.log(55.0 / 60.0) + sigma**2 / 2) / sigma
    assert between.late["a"] == pytest.approx(math.erfc(z / math.sqrt(2)) / 2)
    assert 0.3 < between.late["a"] < simulate.AT_RISK
    assert _floor_at_the_start(60.0 * math.exp(-(sigma**2) / 2)).late["a"] == pytest.approx(0.5)
    assert _floor_at_the_start(45.0).late["a"] > simulate.AT_RISK
