"""The baseline replays on small workloads checked by hand."""

from __future__ import annotations

import pytest

from tools.baselines import (
    Blackout,
    Job,
    proportional_slots,
    replay_fair,
    replay_fair_served,
    replay_fifo,
    replay_loop,
    replay_proportional,
)


def starts(outcome_start: dict[str, float]) -> dict[str, float]:
    return dict(sorted(outcome_start.items()))


ONE_LANE = [
    Job("A", "a", 0, 2),
    Job("B", "a", 0, 2),
    Job("C", "a", 0, 2),
    Job("D", "b", 1, 1),
]


def test_fifo_runs_oldest_first() -> None:
    outcome = replay_fifo(ONE_LANE, budget=1)
    assert starts(outcome.start) == {"A": 0, "B": 2, "C": 4, "D": 6}
    assert outcome.finish == {"A": 2, "B": 4, "C": 6, "D": 7}


def test_fair_recomputes_rounds_from_the_waiting_charts_alone() -> None:
    # At 2: B (a, round 0), D (b, round 0, created 1), C (a, round 1): B starts. At 4 C is org a's
    # only waiting chart, round 0 again, and older than D: with one slot freeing at a time the
    # contract's order serves the oldest head, like FIFO.
    outcome = replay_fair(ONE_LANE, budget=1, weights={"a": 1, "b": 1})
    assert starts(outcome.start) == {"A": 0, "B": 2, "C": 4, "D": 6}


STAGGERED = [
    Job("A", "a", 0, 1),
    Job("B", "a", 0, 3),
    Job("C", "a", 0, 1),
    Job("E", "a", 0, 1),
    Job("D", "b", 0.5, 1),
]


def test_one_slot_at_a_time_the_oldest_head_keeps_winning_round_0() -> None:
    # At 1 and at 2 one slot frees; org a's head (created 0) is in round 0 each time and older than D.
    outcome = replay_fair(STAGGERED, budget=2, weights={"a": 1, "b": 1})
    assert starts(outcome.start) == {"A": 0, "B": 0, "C": 1, "D": 3, "E": 2}


def test_counting_running_charts_as_served_lets_the_newcomer_in() -> None:
    # At 1 org a runs B: its waiting charts are in rounds 1 and 2, D in round 0: D starts.
    outcome = replay_fair_served(STAGGERED, budget=2, weights={"a": 1, "b": 1})
    assert starts(outcome.start) == {"A": 0, "B": 0, "C": 2, "D": 1, "E": 3}


def test_the_fair_loop_keeps_each_orgs_place_in_the_rounds_from_instant_to_instant() -> None:
    # At 0 A starts: org a has taken round 0, and b (idle) is raised to the round under way. At 1 D
    # arrives in round 0, B and C are in rounds 1 and 2: when A ends at 2, D goes before B (the bare
    # contract order would start B there, `test_fair_recomputes_rounds_from_the_waiting_charts_alone`).
    outcome = replay_loop(ONE_LANE, budget=1, weights={"a": 1, "b": 1})
    assert starts(outcome.start) == {"A": 0, "B": 3, "C": 5, "D": 2}


def test_the_fair_loop_holds_an_org_in_its_blackout_and_gives_it_no_credit_for_it() -> None:
    jobs = [*(Job(f"a{i}", "a", 0, 1) for i in range(4)), Job("b0", "b", 0, 1), Job("b1", "b", 0, 1)]
    outcome = replay_loop(jobs, budget=1, weights={"a": 1, "b": 1}, blackouts=[Blackout("b", 0, 3)])
    # a runs alone while b is held; from 3 on b joins the round under way: they alternate.
    assert starts(outcome.start) == {"a0": 0, "a1": 1, "a2": 2, "b0": 3, "a3": 4, "b1": 5}


def test_due_first_orders_an_orgs_charts_by_due_time_inside_its_share() -> None:
    # a's A is due at 10 and B at 5; b's D sits between them in the rounds either way.
    jobs = [Job("A", "a", 0, 1, due=10.0), Job("B", "a", 0, 1, due=5.0), Job("D", "b", 0, 1, due=20.0)]
    weights = {"a": 1, "b": 1}
    assert starts(replay_loop(jobs, budget=1, weights=weights).start) == {"A": 0, "B": 2, "D": 1}
    assert starts(replay_loop(jobs, budget=1, weights=weights, due_first=True).start) == {"A": 2, "B": 0, "D": 1}


def test_proportional_rounds_the_small_org_down() -> None:
    # At 1 and 2 org b's share rounds to 0 slots; at 4 both have 0.5 -> 1 and the oldest (C) goes first.
    outcome = replay_proportional(ONE_LANE, budget=1)
    assert starts(outcome.start) == {"A": 0, "B": 2, "C": 4, "D": 6}


def test_head_of_line_in_fifo_and_cost_units() -> None:
    jobs = [Job("X", "a", 0, 2, cost=2), Job("Y", "a", 0, 2, cost=2), Job("Z", "b", 0, 1)]
    fifo = replay_fifo(jobs, budget=3)
    assert starts(fifo.start) == {"X": 0, "Y": 2, "Z": 2}  # Z may not overtake Y at 0
    fair = replay_fair(jobs, budget=3, weights={})
    assert starts(fair.start) == {"X": 0, "Y": 2, "Z": 0}  # Z is in round 0, Y in round 1


def test_a_chart_dearer_than_the_budget_runs_alone() -> None:
    outcome = replay_fifo([Job("big", "a", 0, 1, cost=9), Job("s", "a", 0, 1)], budget=2)
    assert starts(outcome.start) == {"big": 0, "s": 1}


def test_backfill_starves_a_small_org_under_fifo_and_proportional_not_under_fair() -> None:
    jobs = [Job(f"big{i:02}", "big", 0, 1) for i in range(40)] + [Job("s", "small", 0.5, 1)]
    assert replay_fifo(jobs, budget=4).start["s"] == 10
    # q_small / Q x 4 stays under 1/2 until the backfill is down to 4 outstanding charts, at 9.
    assert replay_proportional(jobs, budget=4).start["s"] == 9
    assert replay_fair(jobs, budget=4, weights={}).start["s"] == 1  # 4 slots free at once at 1
    assert replay_fair_served(jobs, budget=4, weights={}).start["s"] == 1


def test_weights_shape_the_fair_replay() -> None:
    jobs = [Job(f"h{i}", "heavy", 0, 1) for i in range(4)] + [Job(f"l{i}", "light", 0, 1) for i in range(4)]
    outcome = replay_fair(jobs, budget=3, weights={"heavy": 2, "light": 1})
    first = sorted(job for job, start in outcome.start.items() if start == 0)
    assert first == ["h0", "h1", "l0"]


@pytest.mark.parametrize("replay", [replay_fifo, replay_proportional])
def test_blackouts_delay_an_org_and_let_others_pass(replay: object) -> None:
    jobs = [Job("held", "h", 0, 1), Job("other", "o", 1, 1)]
    outcome = replay(jobs, budget=1, blackouts=[Blackout("h", 0, 5)])  # type: ignore[operator]
    assert starts(outcome.start) == {"held": 5, "other": 1}


def test_fair_holds_an_org_during_its_blackout() -> None:
    jobs = [Job("held", "h", 0, 1), Job("other", "o", 1, 1)]
    outcome = replay_fair(jobs, budget=1, weights={"h": 1, "o": 1}, blackouts=[Blackout("h", 0, 5)])
    assert starts(outcome.start) == {"held": 5, "other": 1}


def test_proportional_slots_round_halves_up() -> None:
    assert proportional_slots({"a": 1, "b": 1}, 1) == {"a": 1, "b": 1}
    assert proportional_slots({"a": 36, "b": 1}, 4) == {"a": 4, "b": 0}
    assert proportional_slots({}, 4) == {}


def test_every_job_starts_and_finishes_once_in_every_replay() -> None:
    jobs = [Job(f"j{i}", f"o{i % 3}", i * 0.3, 1 + (i % 4) * 0.5, cost=1 + i % 2) for i in range(30)]
    for outcome in (
        replay_fifo(jobs, budget=3),
        replay_proportional(jobs, budget=3),
        replay_fair(jobs, budget=3, weights={"o0": 2}),
        replay_fair_served(jobs, budget=3, weights={"o0": 2}),
    ):
        assert set(outcome.start) == set(outcome.finish) == {job.id for job in jobs}
        for job in jobs:
            assert outcome.start[job.id] >= job.arrival
            assert outcome.finish[job.id] == pytest.approx(outcome.start[job.id] + job.duration)


def test_a_replay_can_start_mid_way_with_charts_in_flight() -> None:
    from tools.baselines import Running, pick_fifo, replay

    in_flight = Running(Job("r", "a", 0, 3), started=0)
    outcome = replay([Job("w", "b", 1, 1)], budget=1, pick=pick_fifo, running=[in_flight], now=1)
    assert outcome.start == {"w": 3}
    assert outcome.finish == {"w": 4}
