"""The virtual-time rule that keeps each org's place in the rounds across replans (`core.service`)."""

from __future__ import annotations

import pytest

from scheduling.core import QueuedChart, Scenario, fair_order
from scheduling.core.service import OrgService, fair_service, start_service


def test_a_start_adds_one_over_the_weight_or_the_cost_over_the_deficit_round() -> None:
    assert start_service(weight=4, cost=3, policy="round_robin", quantum=2.0) == 0.25
    assert start_service(weight=4, cost=3, policy="deficit", quantum=2.0) == 3 / 8


def test_a_weight_change_does_not_rescale_the_past() -> None:
    # acme (weight 3) and beta (weight 2) were each given 10 rounds; acme is lowered to 2.
    orgs = {"acme": OrgService(2, None, 10.0), "beta": OrgService(2, None, 10.0)}
    policies, round_under_way = fair_service(
        orgs, ready={"acme", "beta"}, backlogged={"acme", "beta"}, policy="round_robin", quantum=1.0
    )
    assert round_under_way == 10.0
    assert {key: policy.served for key, policy in policies.items()} == {"acme": 0.0, "beta": 0.0}
    queued = [QueuedChart(f"{org}{i}", org, float(i), 60.0) for org in ("acme", "beta") for i in range(4)]
    order = [chart.org for chart in fair_order(Scenario(now=0.0, budget=1, orgs=policies, queued=queued))]
    # Two of each per round (by age inside a round), not every acme chart behind beta's backlog.
    assert order == ["acme", "beta"] * 4


def test_an_org_ahead_keeps_its_lead_in_its_current_unit() -> None:
    orgs = {"acme": OrgService(3, None, 11.0), "beta": OrgService(2, None, 10.5)}
    policies, round_under_way = fair_service(
        orgs, ready={"acme", "beta"}, backlogged={"acme", "beta"}, policy="round_robin", quantum=1.0
    )
    assert round_under_way == 10.5
    assert policies["acme"].served == pytest.approx(1.5)  # half a round of weight 3
    assert policies["beta"].served == 0.0


def test_the_round_under_way_is_set_by_the_orgs_that_can_start_now() -> None:
    # beta is capped (not ready) and far behind: it does not hold the round back, and gets no credit.
    orgs = {"acme": OrgService(1, None, 20.0), "beta": OrgService(1, 1, 3.0), "idle": OrgService(1, None, 0.0)}
    policies, round_under_way = fair_service(
        orgs, ready={"acme"}, backlogged={"acme", "beta"}, policy="deficit", quantum=1.0
    )
    assert round_under_way == 20.0
    assert {key: policy.served for key, policy in policies.items()} == {"acme": 0.0, "beta": 0.0, "idle": 0.0}


def test_with_no_org_ready_the_backlogged_set_the_round_and_with_none_there_is_none() -> None:
    orgs = {"acme": OrgService(1, None, 5.0), "beta": OrgService(2, None, 7.0)}
    _, round_under_way = fair_service(orgs, ready=set(), backlogged={"acme", "beta"}, policy="round_robin", quantum=1.0)
    assert round_under_way == 5.0
    policies, none = fair_service(orgs, ready=set(), backlogged=set(), policy="round_robin", quantum=1.0)
    assert none is None
    assert {key: policy.served for key, policy in policies.items()} == {"acme": 0.0, "beta": 0.0}
