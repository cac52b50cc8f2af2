"""The state machine: every allowed transition works and is logged, every other one is refused and
writes nothing; the compare-and-swap lets exactly one of two racing passes win."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartState
from charts.states import TRANSITIONS, IllegalTransition, can_transition, transition, transition_if
from common.actors import Actor
from common.errors import Conflict
from tests.conftest import CallerFailed, Tenants, fail_after
from tests.factories import ChartFactory

pytestmark = pytest.mark.django_db

STATES = ChartState.values
ALLOWED = [(a, b) for a in STATES for b in STATES if b in TRANSITIONS[a]]
FORBIDDEN = [(a, b) for a in STATES for b in STATES if b not in TRANSITIONS[a]]
ACTOR = Actor("system:test", staff=True)


def make_chart(tenants: Tenants, state: str) -> Chart:
    return ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state)


def test_the_table_names_every_state_and_only_states() -> None:
    assert set(TRANSITIONS) == set(STATES)
    assert all(targets <= set(STATES) for targets in TRANSITIONS.values())
    assert all(not TRANSITIONS[s] for s in ("succeeded", "failed", "cancelled"))
    assert len(ALLOWED) == 19
    assert "queued" in TRANSITIONS["running"]  # a run its provider throttled goes back to the queue
    assert len(ALLOWED) + len(FORBIDDEN) == len(STATES) ** 2


@pytest.mark.parametrize(("from_state", "to_state"), ALLOWED)
def test_allowed_transition_moves_the_chart_and_logs_it(tenants: Tenants, from_state: str, to_state: str) -> None:
    chart = make_chart(tenants, from_state)
    attempt_at = timezone.now()
    moved = transition(chart, to_state, actor=ACTOR, reason="because", attempt=2, claimed_at=attempt_at)
    assert moved is chart
    assert (chart.state, chart.attempt) == (to_state, 2)
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.state, stored.attempt, stored.claimed_at) == (to_state, 2, attempt_at)
    event = ChartEvent.objects.get(chart=chart)
    assert (event.from_state, event.to_state, event.actor, event.reason) == (
        from_state,
        to_state,
        ACTOR.name,
        "because",
    )
    assert can_transition(from_state, to_state)


@pytest.mark.parametrize(("from_state", "to_state"), FORBIDDEN)
def test_forbidden_transition_is_refused_and_writes_nothing(tenants: Tenants, from_state: str, to_state: str) -> None:
    chart = make_chart(tenants, from_state)
    with pytest.raises(IllegalTransition) as error:
        transition(chart, to_state, actor=ACTOR, attempt=9)
    assert isinstance(error.value, Conflict)
    assert error.value.status == 409
    assert (error.value.from_state, error.value.to_state) == (from_state, to_state)
    assert f"cannot go from {from_state} to {to_state}" in error.value.message
    with pytest.raises(IllegalTransition):
        transition_if(chart.pk, [from_state], to_state, actor=ACTOR)
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.state, stored.attempt) == (from_state, 0)
    assert not ChartEvent.objects.exists()
    assert not can_transition(from_state, to_state)


def test_a_stale_chart_is_refused_with_its_real_state(tenants: Tenants) -> None:
    chart = make_chart(tenants, ChartState.QUEUED)
    stale = Chart.objects.get(pk=chart.pk)
    transition(chart, ChartState.CANCELLED, actor=ACTOR)
    with pytest.raises(IllegalTransition) as error:
        transition(stale, ChartState.PAUSED, actor=ACTOR)
    assert error.value.from_state == ChartState.CANCELLED
    assert stale.state == ChartState.CANCELLED
    assert ChartEvent.objects.count() == 1


def test_the_update_and_its_event_commit_or_roll_back_together(tenants: Tenants, monkeypatch: Any) -> None:
    chart = make_chart(tenants, ChartState.QUEUED)

    def broken_create(**kwargs: Any) -> None:
        raise RuntimeError("event log is down")

    monkeypatch.setattr(ChartEvent.objects, "create", broken_create)
    with pytest.raises(RuntimeError):
        transition(chart, ChartState.PAUSED, actor=ACTOR)
    assert Chart.objects.get(pk=chart.pk).state == ChartState.QUEUED


def test_a_transition_inside_a_rolled_back_transaction_leaves_no_trace(tenants: Tenants) -> None:
    chart = make_chart(tenants, ChartState.QUEUED)
    with pytest.raises(CallerFailed):
        fail_after(lambda: transition(chart, ChartState.PAUSED, actor=ACTOR))
    assert Chart.objects.get(pk=chart.pk).state == ChartState.QUEUED
    assert not ChartEvent.objects.exists()


def test_transition_if_is_a_compare_and_swap(tenants: Tenants) -> None:
    chart = make_chart(tenants, ChartState.QUEUED)
    assert transition_if(
        chart.pk, [ChartState.QUEUED, ChartState.RETRY_WAIT], ChartState.DISPATCHING, actor=Actor("a", staff=True)
    )
    # The second claim read the same "queued" but the row has moved on: it loses and writes nothing.
    assert not transition_if(
        chart.pk, [ChartState.QUEUED, ChartState.RETRY_WAIT], ChartState.DISPATCHING, actor=Actor("b", staff=True)
    )
    events = list(ChartEvent.objects.values_list("from_state", "to_state", "actor"))
    assert events == [("queued", "dispatching", "a")]


def test_transition_if_records_the_state_the_row_really_had(tenants: Tenants) -> None:
    chart = make_chart(tenants, ChartState.RETRY_WAIT)
    sources = [ChartState.QUEUED, ChartState.RETRY_WAIT]
    assert transition_if(chart.pk, sources, ChartState.DISPATCHING, actor=ACTOR, reason="x" * 2000, attempt=2)
    event = ChartEvent.objects.get()
    assert (event.from_state, event.to_state, len(event.reason)) == ("retry_wait", "dispatching", 1000)
    assert Chart.objects.get(pk=chart.pk).attempt == 2


def test_transition_if_ignores_sources_that_cannot_reach_the_target(tenants: Tenants) -> None:
    chart = make_chart(tenants, ChartState.SUCCEEDED)
    assert not transition_if(chart.pk, [ChartState.SUCCEEDED, ChartState.RUNNING], ChartState.FAILED, actor=ACTOR)
    assert Chart.objects.get(pk=chart.pk).state == ChartState.SUCCEEDED
    with pytest.raises(IllegalTransition):
        transition_if(chart.pk, [ChartState.SUCCEEDED], ChartState.FAILED, actor=ACTOR)


@pytest.mark.django_db(transaction=True)
def test_two_racing_claims_have_exactly_one_winner(tenants: Tenants) -> None:
    chart = make_chart(tenants, ChartState.QUEUED)
    barrier = threading.Barrier(2)
    wins: list[bool] = []

    def claim(actor: Actor) -> None:
        try:
            barrier.wait()
            wins.append(transition_if(chart.pk, [ChartState.QUEUED], ChartState.DISPATCHING, actor=actor))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(Actor.system(f"dispatcher-{i}"),)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False, True]
    assert ChartEvent.objects.filter(chart=chart).count() == 1
    assert Chart.objects.get(pk=chart.pk).state == ChartState.DISPATCHING
