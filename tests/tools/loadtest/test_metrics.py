"""The load-run figures on small synthetic event logs, checked by hand."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tools.loadtest.logs import chart, lifecycle, log_of
from tools.loadtest import metrics


def test_quantile_interpolates() -> None:
    assert metrics.quantile([], 0.5) is None
    assert metrics.quantile([3, 1, 2], 0.5) == 2
    assert metrics.quantile([0, 10], 0.9) == pytest.approx(9)


def test_weighted_jain() -> None:
    assert metrics.weighted_jain({"a": 3, "b": 1}, {"a": 3, "b": 1}) == pytest.approx(1.0)
    # x = (4, 0): (4)^2 / (2 * 16) = 0.5, the worst for two orgs.
    assert metrics.weighted_jain({"a": 4}, {"a": 1, "b": 1}) == pytest.approx(0.5)
    # x = (2, 1): 9 / (2 * 5) = 0.9.
    assert metrics.weighted_jain({"a": 2, "b": 1}, {"a": 1, "b": 1}) == pytest.approx(0.9)
    assert metrics.weighted_jain({}, {"a": 1}) is None


def test_budget_replay_finds_the_peak_and_any_excess() -> None:
    charts = [chart(1, "big", 0, finished=4), chart(2, "big", 0, finished=5), chart(3, "small", 1, finished=6)]
    transitions = lifecycle(1, 0, 1, 4) + lifecycle(2, 0, 1, 5) + lifecycle(3, 1, 4, 6)
    figures = metrics.budget_figures(log_of(charts, transitions))
    assert figures.peak == 2
    assert figures.exceeded_at == []
    transitions = lifecycle(1, 0, 1, 4) + lifecycle(2, 0, 1, 5) + lifecycle(3, 1, 3, 6)
    figures = metrics.budget_figures(log_of(charts, transitions))
    assert figures.peak == 3
    assert figures.exceeded_at == [3]


def test_a_retry_gives_its_units_back_and_a_dear_chart_counts_its_cost() -> None:
    charts = [chart(1, "big", 0, finished=9, cost=2, runs=[("failed", 1, 2), ("completed", 5, 9)])]
    transitions = [
        [1, 0, "", "queued"], [1, 1, "queued", "dispatching"], [1, 1.1, "dispatching", "running"],
        [1, 2, "running", "retry_wait"], [1, 5, "retry_wait", "dispatching"], [1, 5.1, "dispatching", "running"],
        [1, 9, "running", "succeeded"],
    ]  # fmt: skip
    figures = metrics.budget_figures(log_of(charts, transitions))
    assert figures.peak == 2
    assert [units for _, units in figures.in_flight] == [2, 0, 2, 0]


def test_integrity_of_a_clean_run() -> None:
    charts = [chart(1, "big", 0, finished=4), chart(2, "small", 1, finished=5)]
    figures = metrics.integrity_figures(log_of(charts, lifecycle(1, 0, 1, 4) + lifecycle(2, 1, 2, 5)))
    assert figures.ok
    assert figures.lost == 0
    assert figures.runs_described == 2


def test_integrity_finds_lost_twice_run_and_disagreeing_charts() -> None:
    charts = [
        chart(1, "big", 0, finished=4, runs=[("completed", 1, 4), ("completed", 5, 8)]),  # ran twice
        chart(2, "big", 0, state="running", finished=None, runs=[("running", 1, None)]),  # never ended
        chart(3, "small", 1, finished=5, runs=[("failed", 2, 5)]),  # DB says succeeded, Temporal failed
    ]
    transitions = lifecycle(1, 0, 1, 4) + lifecycle(3, 1, 2, 5) + [[2, 0, "", "queued"]]
    log = log_of(charts, transitions, planned_charts=4)  # one chart never reached the database
    log["temporal_unknown_workflows"] = ["chart-99-a1"]
    figures = metrics.integrity_figures(log)
    assert figures.not_one_terminal == [2]
    assert figures.lost == 2
    assert figures.run_twice == [1]
    assert any("still running" in d for d in figures.disagreements)
    assert any("chart 3" in d and "last run is failed" in d for d in figures.disagreements)
    assert figures.temporal_unknown == ["chart-99-a1"]
    assert not figures.ok


def test_eta_errors_band_coverage_and_the_naive_formula() -> None:
    # Chart 1: predicted at 0 to finish at 4, finished at 5: error 1/5. Band [3, 6] holds 5.
    # Chart 2: predicted at 1 to finish at 9, finished at 6: error 3/5. Band [7, 8] misses 6.
    charts = [
        chart(1, "big", 0, finished=5, runs=[("completed", 0.5, 5)],
              eta_enqueue={"at": 0, "eta": 4, "low": 3, "high": 6},
              eta_start={"at": 0.4, "eta": 4.4, "low": 3, "high": 6}),
        chart(2, "small", 1, finished=6, runs=[("completed", 5, 6)],
              eta_enqueue={"at": 1, "eta": 9, "low": 7, "high": 8}),
    ]  # fmt: skip
    figures = metrics.eta_figures(log_of(charts, lifecycle(1, 0, 0.5, 5) + lifecycle(2, 1, 5, 6)))
    assert figures.at_enqueue.count == 2
    assert figures.at_enqueue.median == pytest.approx((0.2 + 0.6) / 2)
    assert figures.band_enqueue == 0.5
    assert figures.at_start.count == 1
    assert figures.at_start.median == pytest.approx(0.6 / 4.6)
    assert figures.band_start == 1.0
    # Naive at 0: 1 pending unit x default 2 s / budget 2 = 1 -> eta 1, error |1 - 5| / 5.
    # Naive at 1: 2 pending units x 2 s / 2 = 2 -> eta 3, error |3 - 6| / 5.
    assert figures.naive_at_enqueue.median == pytest.approx((0.8 + 0.6) / 2)
    assert metrics.naive_eta(log_of(charts, []), 5.5) == pytest.approx(5.5 + 1 * 4.5 / 2)


def test_etas_over_the_wait_by_depth_and_org_clear_times() -> None:
    # Mean duration 2 s: a chart that waited 10 s or more is deep. Chart 1 waited 12 s (deep), chart 2
    # 1 s (shallow). Samples over the wait: chart 1 at 0 (ETA 10, finished 14: -4/14) and at 7 (ETA
    # 15, band [13, 16]: +1/7, inside); chart 2 at 2 (ETA 4, band [3.5, 3.8], finished 5: -1/3, outside).
    charts = [
        chart(1, "big", 0, finished=14, runs=[("completed", 12, 14)],
              eta_enqueue={"at": 0, "eta": 10, "low": None, "high": None}),
        chart(2, "small", 2, finished=5, runs=[("completed", 3, 5)],
              eta_enqueue={"at": 2, "eta": 4, "low": 3.5, "high": 3.8}),
    ]  # fmt: skip
    charts[0]["eta_wait"] = [
        {"at": 0, "eta": 10, "low": None, "high": None},
        {"at": 7, "eta": 15, "low": 13, "high": 16},
    ]
    charts[1]["eta_wait"] = [{"at": 2, "eta": 4, "low": 3.5, "high": 3.8}]
    log = log_of(charts, lifecycle(1, 0, 12, 14) + lifecycle(2, 2, 3, 5), seconds=10.0)
    # big at 1 holds chart 1 (finishes 14): clear 15 -> +1/13. small at 3 holds chart 2 (finishes 5):
    # clear 4 -> -1/2. big at 14 holds nothing: left out.
    log["org_clear"] = [{"at": 1, "org": "big", "clear": 15}, {"at": 3, "org": "small", "clear": 4},
                        {"at": 14, "org": "big", "clear": 14}]  # fmt: skip
    figures = metrics.eta_figures(log)
    assert figures.enqueue_deep.count == 1
    assert figures.enqueue_deep.median == pytest.approx(4 / 14)
    assert figures.enqueue_deep.bias == pytest.approx(-4 / 14)
    assert figures.enqueue_shallow.median == pytest.approx(1 / 3)
    assert figures.sampled.count == 3
    assert figures.sampled_deep.count == 2
    assert figures.sampled_deep.median == pytest.approx((4 / 14 + 1 / 7) / 2)
    assert figures.sampled_shallow.bias == pytest.approx(-1 / 3)
    assert figures.band_sampled == 0.5
    assert figures.band_width_sampled == pytest.approx(((3 / 7) + (0.3 / 3)) / 2)
    assert figures.org_clear.count == 2
    assert figures.org_clear.median == pytest.approx((1 / 13 + 1 / 2) / 2)
    # Enqueue ETAs made after the first tenth of the 10 s run: chart 2's (at 2), not chart 1's (at 0).
    assert figures.after_first_tenth.count == 1
    assert figures.after_first_tenth.median == pytest.approx(1 / 3)
    # Their bands, at enqueue and sampled: chart 2's at 2 (outside) and chart 1's at 7 (inside);
    # chart 1's at 0 is in the first tenth and has no band either.
    assert figures.band_enqueue_after_first_tenth == 0.0
    assert figures.band_sampled_after_first_tenth == 0.5


def schedule(charts: list[metrics.ChartRun], budget: int = 2, weights: dict[str, int] | None = None,
             kinds: dict[str, str] | None = None) -> metrics.Schedule:  # fmt: skip
    return metrics.Schedule(
        "test", charts, budget, weights or {"big": 1, "small": 1}, kinds or {"big": "backfill", "small": "small"}
    )


def run(chart_id: str, org: str, arrival: float, start: float | None, duration: float = 1.0) -> metrics.ChartRun:
    return metrics.ChartRun(chart_id, org, arrival, arrival, start, None if start is None else start + duration)


def test_a_newcomer_within_one_round_and_its_share_of_the_next_starts() -> None:
    # budget 1, one-second charts: big runs b0 at 0, the newcomer arrives at 0.5 and starts at 1.
    charts = [run(f"b{i}", "big", 0, float(i if i == 0 else i + 1)) for i in range(5)]
    charts.append(run("s0", "small", 0.5, 1.0))
    (newcomer,) = metrics.newcomers(schedule(charts, budget=1))
    assert newcomer.first_wait == 0.5
    assert newcomer.others_before == 0
    assert newcomer.round_size == 2
    assert newcomer.within_round
    assert newcomer.share_next == pytest.approx(1 / 5)  # 5 starts after its arrival, one of them its own
    assert newcomer.fair_share_next == pytest.approx(1 / 5)  # weight 1 of 2, but one chart waiting


def test_a_newcomer_that_waits_for_the_backlog_is_not_within_one_round() -> None:
    charts = [run(f"b{i}", "big", 0, float(i)) for i in range(5)]
    charts.append(run("s0", "small", 0.5, 5.0))
    (newcomer,) = metrics.newcomers(schedule(charts, budget=1))
    assert newcomer.others_before == 4
    assert not newcomer.within_round


def test_a_newcomers_first_start_is_that_of_any_of_its_charts() -> None:
    # Its burst of two arrives at 0.5; due first starts the second (due sooner) at 1, the first at 3.
    charts = [run(f"b{i}", "big", 0, float(i if i == 0 else i + 2)) for i in range(5)]
    charts += [run("s0", "small", 0.5, 3.0), run("s1", "small", 0.5, 1.0)]
    (newcomer,) = metrics.newcomers(schedule(charts, budget=1))
    assert newcomer.first_wait == 0.5
    assert newcomer.others_before == 0
    assert newcomer.within_round


def test_saturated_windows_measure_weighted_shares() -> None:
    # Budget 2 for 30 s: gold (weight 2) starts 2 one-second charts per second, then silver's
    # charts wait behind... here both are backlogged all along and get 1 slot each: x = (15/2, 15).
    charts = []
    for second in range(30):
        charts.append(run(f"g{second}", "gold", 0, float(second)))
        charts.append(run(f"s{second}", "silver", 0, float(second)))
    result = metrics.saturated_windows(schedule(charts, weights={"gold": 2, "silver": 1}, kinds={}), window=10.0)
    assert [w.start for w in result] == [0.0, 10.0]
    assert all(w.orgs == ["gold", "silver"] for w in result)
    assert result[0].jain == pytest.approx((5 + 10) ** 2 / (2 * (25 + 100)))
    assert result[0].jain_held == pytest.approx(result[0].jain)  # one-second charts: held = started


def test_a_window_where_the_pool_is_not_full_is_not_saturated() -> None:
    charts = [run(f"g{i}", "gold", 0, float(2 * i)) for i in range(20)]
    charts += [run(f"s{i}", "silver", 0, float(2 * i)) for i in range(20)]
    assert metrics.saturated_windows(schedule(charts, budget=4, kinds={}), window=10.0) == []


def test_recovery_is_the_first_start_after_the_service_is_back() -> None:
    charts = [chart(1, "big", 0, finished=4), chart(2, "big", 0, finished=12)]
    log = log_of(charts, lifecycle(1, 0, 1, 4) + lifecycle(2, 0, 9, 12))
    log["faults"] = [{"kind": "kill_worker", "at": 5.0, "restored": 7.0, "detail": ""}]
    (recovery,) = metrics.recoveries(log)
    assert recovery.claimed_at_fault == 0
    assert recovery.first_start == pytest.approx(9.01)
    assert recovery.recovery_seconds == pytest.approx(4.01)


def test_the_live_schedule_counts_a_held_org_from_its_release() -> None:
    charts = [chart(1, "big", 0, finished=9)]
    log = log_of(charts, lifecycle(1, 0, 6, 9))
    log["holds"] = [{"org": "big", "start": 0.0, "end": 5.0}]
    (entry,) = metrics.live_schedule(log).charts
    assert entry.eligible == 5.0
    assert entry.start == 6.0


def test_a_fault_between_claim_and_start_counts_the_claimed_charts() -> None:
    charts = [chart(1, "big", 0, finished=9)]
    transitions = [[1, 0, "", "queued"], [1, 2, "queued", "dispatching"], [1, 7, "dispatching", "running"]]
    log = log_of(charts, [*transitions, [1, 9, "running", "succeeded"]])
    log["faults"] = [{"kind": "kill_worker", "at": 2.5, "restored": 4.0, "detail": ""}]
    (recovery,) = metrics.recoveries(log)
    assert recovery.claimed_at_fault == 1
    assert recovery.first_start == 7


def test_a_retried_chart_takes_its_units_at_every_run() -> None:
    # flaky's charts fail once each: every chart runs twice, so flaky takes as many units per window
    # as steady, which starts twice the charts; counting first starts only would call flaky starved.
    charts = []
    for second in range(0, 30, 2):
        charts.append(run(f"a{second}", "steady", 0, float(second)))
        charts.append(run(f"b{second}", "steady", 0, float(second + 1)))
        charts.append(
            metrics.ChartRun(
                f"f{second}", "flaky", 0, 0, float(second), float(second + 2),
                attempts=((float(second), float(second + 1)), (float(second + 1), float(second + 2))),
            )
        )  # fmt: skip
    result = metrics.saturated_windows(schedule(charts, weights={"steady": 1, "flaky": 1}, kinds={}), window=10.0)
    assert result
    assert all(w.jain == pytest.approx(1.0) for w in result)


def test_the_live_schedule_holds_units_once_per_run() -> None:
    charts = [chart(1, "flaky", 0, finished=12)]
    transitions = [
        *lifecycle(1, 0, 1, 3)[:-1],
        [1, 3, "running", "retry_wait"],
        [1, 6, "retry_wait", "dispatching"],
        [1, 6.5, "dispatching", "running"],
        [1, 12, "running", "succeeded"],
    ]
    (entry,) = metrics.live_schedule(log_of(charts, transitions)).charts
    assert [start for start, _ in entry.held] == [pytest.approx(1.0, abs=0.02), 6]
    assert [finish for _, finish in entry.held] == [3, 12]


def test_the_drift_phase_splits_the_etas_before_the_change_until_it_is_learned_and_after() -> None:
    # The drift org's charts from 10 s on take 3x; the 10th of them finishes at 39 s. Each chart is
    # sampled once at its submission, with an ETA 1 s early: error 1 / (time left).
    charts = []
    for index in range(16):
        submitted = 2.0 * index + 1.0
        finished = submitted + (3.0 if submitted >= 10 else 1.0) + (8.0 if submitted >= 10 else 0.0)
        sample = {"at": submitted, "eta": finished - 1.0, "low": finished - 2.0, "high": finished + 2.0}
        charts.append(chart(index + 1, "drift", submitted, finished=finished, eta_enqueue=sample))
        charts[-1]["eta_run"] = [sample]
    log = log_of(charts, [], seconds=40.0, drift={"org": "drift", "workflow": "standard", "at": 10.0, "factor": 3.0})
    figures = metrics.drift_figures(log)
    assert figures is not None
    changed = sorted(c["finished"] for c in charts if c["submitted"] >= 10.0)
    assert figures.learned_at == changed[metrics.DRIFT_RUNS - 1]
    before, during, after = figures.windows
    assert (before.start, before.end) == (4.0, 10.0)  # after the first tenth of 40 s
    assert before.enqueue.count == 3  # submitted at 5, 7 and 9
    assert before.enqueue.median == pytest.approx(1.0)  # 1 s early on 1 s left
    assert before.sampled.count == before.drifting.count == 3
    assert before.sampled_band == 1.0
    assert during.enqueue.count + after.enqueue.count == 16 - 5
    assert after.start == figures.learned_at
    assert metrics.drift_figures(log_of(charts, [])) is None


def test_running_etas_shown_in_the_past_are_counted_and_their_band_scored() -> None:
    running = chart(1, "big", 0.0, finished=10.0, runs=[("completed", 1.0, 10.0)])
    running["eta_run"] = [
        {"at": 2.0, "eta": 9.0, "low": 5.0, "high": 12.0},
        {"at": 6.0, "eta": 14.0, "low": 11.0, "high": 16.0},
    ]
    log = log_of([running], lifecycle(1, 0.0, 1.0, 10.0))
    log["running_etas"] = {"checked": 7, "past": [{"chart": 1, "at": 8.0, "eta": 7.5, "low": 7.0, "high": 9.0}]}
    figures = metrics.running_eta_figures(log)
    assert figures.checked == 7
    assert len(figures.past) == 1
    assert figures.latest_lag == pytest.approx(0.5)
    assert figures.sampled.count == 2
    assert figures.band == 0.5  # [5, 12] holds 10, [11, 16] does not


def _hooks(receipts: list[tuple[str, str, float, bool]], *, log_rows: list[list[Any]] | None = None) -> dict[str, Any]:
    """Three feed events a, b, c committed at 100, 101, 102 (rows r-a, r-b, r-c) and an org-only one
    the endpoint does not hear; `receipts` as (event, key, received, signature ok)."""
    feed = [
        {"id": "a", "type": "chart.started", "committed": 100.0, "row": ["chart", "a"]},
        {"id": "b", "type": "chart.succeeded", "committed": 101.0, "row": ["chart", "b"]},
        {"id": "x", "type": "org.held", "committed": 101.5, "row": ["org", "x"]},
        {"id": "c", "type": "chart.failed", "committed": 102.0, "row": ["chart", "c"]},
    ]
    rows = log_rows if log_rows is not None else [event["row"] for event in feed]
    return {
        "webhooks": {
            "event_types": ["chart.started", "chart.succeeded", "chart.failed"],
            "feed": feed,
            "receipts": [
                {"event": event, "key": key, "received": received, "signature_ok": ok}
                for event, key, received, ok in receipts
            ],
            "event_log": rows,
        }
    }


def test_webhooks_of_a_clean_run_with_a_keyed_repeat() -> None:
    figures = metrics.webhook_figures(
        _hooks([("a", "ka", 100.2, True), ("b", "kb", 101.5, True), ("a", "ka", 101.6, True), ("c", "kc", 102.1, True)])
    )
    assert figures is not None
    assert (figures.subscribed, figures.delivered, figures.repeats) == (3, 3, 1)
    assert figures.lost == figures.unkeyed_repeats == figures.out_of_order == []
    assert figures.agrees
    assert figures.latencies == pytest.approx([0.2, 0.5, 0.1])
    assert figures.max == pytest.approx(0.5)
    assert metrics.webhook_figures({}) is None


def test_webhooks_find_lost_unkeyed_repeats_disorder_and_disagreement() -> None:
    # c never arrives with a good signature: lost, even though a forged copy came.
    figures = metrics.webhook_figures(
        _hooks([("a", "ka", 100.2, True), ("b", "kb", 101.5, True), ("c", "kc", 103, False)])
    )
    assert figures is not None
    assert figures.lost == ["c"]
    assert figures.bad_signatures == 1
    # a repeat of b with a new key: a duplicate the receiver cannot recognise.
    figures = metrics.webhook_figures(
        _hooks(
            [("a", "ka", 100.2, True), ("b", "kb", 101.5, True), ("b", "kb2", 101.7, True), ("c", "kc", 102.1, True)]
        )
    )
    assert figures is not None
    assert figures.unkeyed_repeats == ["b"]
    # c first received before b: order broken.
    figures = metrics.webhook_figures(
        _hooks([("a", "ka", 100.2, True), ("c", "kc", 102.1, True), ("b", "kb", 102.2, True)])
    )
    assert figures is not None
    assert figures.out_of_order == ["b"]
    # the event log has a row the feed lacks, and lacks one the feed has (the org one).
    receipts = [("a", "ka", 100.2, True), ("b", "kb", 101.5, True), ("c", "kc", 102.1, True)]
    rows = [["chart", "a"], ["chart", "b"], ["chart", "c"], ["chart", "d"]]
    figures = metrics.webhook_figures(_hooks(receipts, log_rows=rows))
    assert figures is not None
    assert not figures.agrees
    assert figures.log_only == [str(("chart", "d"))]
    assert figures.feed_only == [str(("org", "x"))]


def test_attainment_counts_a_failed_chart_as_a_miss_and_leaves_a_cancelled_one_out() -> None:
    """The live run's promises, due 4 s after submission: big's chart 1 succeeded at 3 s (kept), 2 failed
    at 1 s (a miss, however early: the result promised never came), 3 was cancelled by its customer
    (not counted); small's chart 4 succeeded late. The same charts are judged in every schedule."""
    charts = [
        {**chart(1, "big", 0.0, finished=3.0), "due_in": 4.0},
        {**chart(2, "big", 0.0, state="failed", finished=1.0, runs=[("failed", 0.0, 1.0)]), "due_in": 4.0},
        {**chart(3, "big", 0.0, state="cancelled", finished=9.0, runs=[]), "due_in": 4.0},
        {**chart(4, "small", 0.0, finished=6.0), "due_in": 4.0},
    ]
    log = log_of(charts, lifecycle(1, 0.0, 1.0, 3.0) + lifecycle(4, 0.0, 5.0, 6.0), seconds=10.0)

    promises = metrics.promises(log)
    attained = metrics.attainment(metrics.live_schedule(log), promises)

    assert set(promises.due) == {"1", "2", "4"}
    assert promises.failed == frozenset({"2"})
    assert (attained.charts, attained.met) == ({"big": 2, "small": 1}, {"big": 1, "small": 0})
    assert attained.overall == pytest.approx(1 / 3)
