"""The `served` extension: what an org was already given in the rounds under way counts toward its
rounds, so that replanning after each start cannot hand every slot to the org with the oldest head."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scheduling.core import Aging, OrgPolicy, QueuedChart, Scenario, fair_order, parse_scenario, plan


def ids(scenario: Scenario) -> list[str]:
    return [chart.id for chart in fair_order(scenario)]


def backlog_and_newcomer(**orgs: OrgPolicy) -> Scenario:
    queued = [QueuedChart(f"a{i}", "a", created=i, avg=10) for i in range(4)]
    queued.append(QueuedChart("b0", "b", created=100, avg=10))
    return Scenario(now=200, budget=1, orgs=orgs, queued=queued)


def test_served_zero_is_the_contract() -> None:
    plain = backlog_and_newcomer(a=OrgPolicy(), b=OrgPolicy())
    explicit = backlog_and_newcomer(a=OrgPolicy(served=0), b=OrgPolicy(served=0))
    assert ids(plain) == ids(explicit) == ["a0", "b0", "a1", "a2", "a3"]


def test_an_org_that_was_served_this_round_waits_for_the_next() -> None:
    scenario = backlog_and_newcomer(a=OrgPolicy(served=1), b=OrgPolicy())
    assert ids(scenario) == ["b0", "a0", "a1", "a2", "a3"]


def test_served_counts_in_slots_of_the_weight() -> None:
    heavy = backlog_and_newcomer(a=OrgPolicy(weight=2, served=1), b=OrgPolicy())
    # a has one slot of its two left in round 0: a0 keeps it (oldest), b0 follows, a1 opens round 1.
    assert ids(heavy) == ["a0", "b0", "a1", "a2", "a3"]


def test_deficit_counts_served_cost_units() -> None:
    queued = [QueuedChart(f"a{i}", "a", created=i, avg=10, cost=2) for i in range(3)]
    queued.append(QueuedChart("b0", "b", created=100, avg=10, cost=2))
    scenario = Scenario(
        now=200, budget=4, policy="deficit", quantum=2, queued=queued,
        orgs={"a": OrgPolicy(served=2), "b": OrgPolicy()},
    )  # fmt: skip
    assert ids(scenario) == ["b0", "a0", "a1", "a2"]


def test_the_high_tier_ignores_served() -> None:
    queued = [QueuedChart("a0", "a", created=0, avg=1, high_priority=True), QueuedChart("b0", "b", created=5, avg=1)]
    scenario = Scenario(now=10, budget=1, orgs={"a": OrgPolicy(served=50)}, queued=queued, aging=Aging(step=1, cap=0))
    assert ids(scenario) == ["a0", "b0"]


def test_served_travels_through_json() -> None:
    scenario = parse_scenario(
        {
            "budget": 1,
            "orgs": {"a": {"served": 1}},
            "queued": [
                {"id": "a0", "org": "a", "created": 0, "avg": 1},
                {"id": "b0", "org": "b", "created": 1, "avg": 1},
            ],
        }
    )
    assert plan(scenario).order == ["b0", "a0"]


@pytest.mark.parametrize("bad", [-1, "1", True, float("inf")])
def test_a_bad_served_is_refused_naming_the_org(bad: object) -> None:
    text = json.dumps({"budget": 1, "orgs": {"acme": {"served": bad}}}, allow_nan=True)
    run = subprocess.run(
        [sys.executable, "-m", "scheduling.core", "plan", "-"], input=text, capture_output=True, text=True, check=False
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.count("\n") == 1
    assert "orgs.acme.served" in run.stderr
