"""The lever fuzz test: random sequences of levers on the real replan and dispatch passes over
PostgreSQL (Temporal faked), with charts starting and finishing between them.

After every replan and every dispatch it takes the charts started since the last lever, followed by
those the new plan starts next, and checks them one start at a time, for each org that has been
backlogged, unheld and uncapped since the lever (the "competing" orgs; a round gives each its unit u:
its weight, x the quantum under deficit, all charts costing 1; U is the competing orgs' sum):
- its wait: between two of its starts (or since the lever), the other competing orgs start no more
  than the rest of the round under way plus one round: 2 x (U - u) charts;
- its share: of the T starts of the competing orgs so far it has T x u / U, give or take its round
  under way and one chart: |s - T u / U| <= u + 1.
A lever that rescaled an org's past (the bug this guards) leaves an org out of whole rounds, or
hands it a burst of them, and breaks both at the first replan after it.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import pytest
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from charts.models import CLAIMABLE_STATES, Chart, ChartState
from charts.services import chart_pause, chart_resume
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.models import Org
from orgs.services import org_cap_set, org_hold, org_release, org_weight_set
from scheduling.replan import plan_refresh
from tests.factories import OrgFactory, WorkflowFactory
from tests.scheduling.passes import ACTOR, dispatch, fair_order, fake_temporal, finish, submit

pytestmark = pytest.mark.django_db

ORGS = ("o0", "o1", "o2", "o3")  # o3 starts idle
# Enough history that a lever rescaling the past would move an org by several rounds.
WARM_UP_BUDGET, WARM_UP_TICKS = 12, 3
EXAMPLES = int(os.environ.get("FAIRSCHED_FUZZ_EXAMPLES", "12"))

org_name = st.sampled_from(ORGS)
weight_change = st.tuples(st.just("weight"), org_name, st.integers(0, 4))
lever = st.one_of(
    weight_change,  # the lever most likely to distort service, drawn three times as often
    weight_change,
    weight_change,
    st.tuples(st.just("hold"), org_name),
    st.tuples(st.just("release"), org_name),
    st.tuples(st.just("cap"), org_name, st.sampled_from([None, None, 1, 2])),
    st.tuples(st.just("pause"), org_name),
    st.tuples(st.just("resume"), org_name),
    st.tuples(st.just("budget"), st.integers(1, 6)),
    st.tuples(st.just("policy"), st.sampled_from([("round_robin", 1.0), ("deficit", 1.0), ("deficit", 2.0)])),
    st.tuples(st.just("submit"), org_name, st.integers(1, 12)),
)
# After each lever, 2 or 3 ticks: a replan and a dispatch, then a share of what runs finishes (at
# least one chart, so that something starts at the next tick).
ticks = st.lists(st.sampled_from([1.0, 0.5, 0.25]), min_size=2, max_size=3)
steps = st.lists(st.tuples(lever, ticks), min_size=2, max_size=5)


def apply(step: tuple[object, ...]) -> None:
    kind, *args = step
    org = Org.objects.get(slug=args[0]) if kind not in {"budget", "policy"} else None
    if kind == "weight":
        org_weight_set(org=org, weight=args[1], actor=ACTOR)  # type: ignore[arg-type]
    elif kind == "hold":
        org_hold(org=org, actor=ACTOR)  # type: ignore[arg-type]
    elif kind == "release":
        org_release(org=org, actor=ACTOR)  # type: ignore[arg-type]
    elif kind == "cap":
        org_cap_set(org=org, max_concurrency=args[1], actor=ACTOR)  # type: ignore[arg-type]
    elif kind == "pause":
        if chart := Chart.objects.filter(org=org, state=ChartState.QUEUED).order_by("created_at", "pk").first():
            chart_pause(chart=chart, actor=ACTOR)
    elif kind == "resume":
        if chart := Chart.objects.filter(org=org, state=ChartState.PAUSED).first():
            chart_resume(chart=chart, actor=ACTOR)
    elif kind == "budget":
        scheduler_config_set(actor=ACTOR, budget=args[0])
    elif kind == "policy":
        policy, quantum = args[0]  # type: ignore[misc]
        scheduler_config_set(actor=ACTOR, policy=policy, quantum=quantum)
    elif kind == "submit":
        submit(org, "w", args[1])  # type: ignore[arg-type]


def competing_units() -> dict[str, float]:
    """The orgs backlogged, unheld and uncapped now, with the charts a round gives each."""
    config = SchedulerConfig.load()
    quantum = config.quantum if config.policy == SchedulerConfig.Policy.DEFICIT else 1.0
    waiting = Counter(
        Chart.objects.filter(state__in=CLAIMABLE_STATES, high_priority=False).values_list("org__slug", flat=True)
    )
    return {
        slug: weight * quantum
        for slug, weight, cap in Org.objects.values_list("slug", "weight", "max_concurrency")
        if weight > 0 and cap is None and waiting[slug]
    }


@dataclass
class Window:
    """The competing orgs since the last lever, and the orgs of the charts started since."""

    units: dict[str, float]
    log: list[str] = field(default_factory=list)

    def keep_only(self, still: dict[str, float]) -> None:
        """An org that stopped competing (drained) leaves the window; nobody joins without a lever."""
        self.units = {slug: unit for slug, unit in self.units.items() if slug in still}

    def check(self, planned: list[str] | None = None) -> None:
        """Check the starts since the lever, followed by the starts the plan has next (cut where the
        first competing org runs out of charts), one start at a time."""
        total_units = sum(self.units.values())
        sequence = [*self.log, *_while_all_compete(planned or [], self.units)]
        starts: Counter[str] = Counter()
        waited: Counter[str] = Counter()
        for index, slug in enumerate(sequence):
            if slug not in self.units:
                continue
            starts[slug] += 1
            waited[slug] = 0
            for other in self.units.keys() - {slug}:
                waited[other] += 1
            total = sum(starts.values())
            for org, unit in self.units.items():
                where = (
                    f"at start {index}: {sequence[: index + 1]} (the first {len(self.log)} done), units {self.units}"
                )
                assert waited[org] <= 2 * (total_units - unit), f"{org} waited {waited[org]} starts {where}"
                share = total * unit / total_units
                assert abs(starts[org] - share) <= unit + 1, f"{org} had {starts[org]} of {total} {where}"


def _while_all_compete(planned: list[str], units: dict[str, float]) -> list[str]:
    last = {slug: index for index, slug in enumerate(planned) if slug in units}
    return planned[: min(last.values()) + 1] if len(last) == len(units) else []


def tick(window: Window, finishing: float) -> None:
    """Replan and check the plan ahead; dispatch and check what started; finish a share of what runs."""
    plan_refresh()
    window.check(fair_order())
    window.log += dispatch()
    window.check()
    running = Chart.objects.filter(state__in=[ChartState.DISPATCHING, ChartState.RUNNING]).count()
    finish(max(1, round(running * finishing)))
    window.keep_only(competing_units())


@pytest.fixture
def _temporal_faked(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_temporal(monkeypatch)


@pytest.mark.usefixtures("_temporal_faked")
@settings(
    max_examples=EXAMPLES,
    derandomize=os.environ.get("FAIRSCHED_FUZZ_RANDOM") is None,
    deadline=None,
    database=None,
    # Each example runs in its own transaction, rolled back at its end (see below).
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# The two reported scenarios, always run: a backlogged org's weight lowered after it was served a
# while; an idle org's weight raised for one replan and set back before it submits.
@example(weights=(3, 2, 1, 1), budget=5, steps=[(("weight", "o0", 2), [1.0, 1.0, 1.0])])
@example(
    weights=(1, 1, 1, 1),
    budget=3,
    steps=[(("weight", "o3", 4), [1.0]), (("weight", "o3", 1), [1.0]), (("submit", "o3", 3), [1.0, 1.0, 1.0])],
)
@given(weights=st.tuples(*[st.integers(1, 3)] * len(ORGS)), budget=st.integers(2, 6), steps=steps)
def test_no_lever_starves_an_org_or_hands_it_a_burst(
    weights: tuple[int, ...], budget: int, steps: list[tuple[tuple[object, ...], list[float]]]
) -> None:
    with transaction.atomic():
        scheduler_config_set(actor=ACTOR, budget=WARM_UP_BUDGET, policy="round_robin", quantum=1.0)
        WorkflowFactory(name="w", default_cost=1)
        for slug, weight in zip(ORGS, weights, strict=True):
            org = OrgFactory(slug=slug, weight=weight)
            if slug != "o3":
                submit(org, "w", 70)
        window = Window(competing_units())
        for _ in range(WARM_UP_TICKS):  # some history before the first lever
            tick(window, 1.0)
        finish()
        scheduler_config_set(actor=ACTOR, budget=budget)
        for step, finishing in steps:
            apply(step)
            window = Window(competing_units())
            for share in finishing:
                tick(window, share)
        transaction.set_rollback(True)
