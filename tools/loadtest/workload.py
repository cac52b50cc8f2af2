"""The hostile workload: who submits what, when, for how long; seeded, so a run can be repeated.

Everything is plain data (no Django): the runner turns it into orgs, workflows and submissions, the
metrics and the baselines read it back. Times are seconds from the start of the run. Chart counts
scale with the run's length so a short test run and a full report run have the same shape.

The cast (budget B cost units, submissions over `seconds` s; k = seconds / 180):
- `backfill`: one huge backfill at 0, about 2/3 of what the pool can run in the whole window;
- `small-NN`: eight small orgs that arrive one after another with a burst of 3 charts and then
  trickle one chart every 15-30 s;
- `slow`: workflows 4x longer and twice as dear (cost 2);
- `flaky`: its workflow fails with probability 0.3 (fairsched retries it);
- `firehose`: enqueues a chart every 2 s without pause;
- `gold` (weight 3) and `silver` (weight 2): a steady backlog each, to show shares follow weights;
- `held`: held from the start, released at 45% of the window;
- `partner`: runs on the `partner-api` provider, which is paused for everyone at 40% for 12%;
- `drift`: a chart every 4-6 s from 5% to 80% of the window; from DRIFT_AT of it on (the drift
  phase), its charts take DRIFT_FACTOR times as long (`Workload.drift`), so the ETAs must learn the
  change from its finished runs.
Durations are lognormal with sigma 0.5 around a median (3 s, 12 s for `slow`), set per chart in the
payload's `duration`.

Promises: each org has a turnaround target (`OrgSpec.turnaround`, TURNAROUNDS scaled by k), and
each chart its own promise (`PlannedChart.due_in`), its org's target x a factor drawn uniformly in
PROMISE_FACTORS, so that due times within an org are not in submission order.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

SIGMA = 0.5
MEDIAN_SECONDS = 3.0
SLOW_FACTOR = 4.0
MIN_DURATION = 0.3
DRIFT_AT = 0.3
DRIFT_FACTOR = 3.0
TASK_QUEUE = "fairsched-loadtest"
# Each org's turnaround target in a 180 s run, in seconds (scaled by k, as the backlogs are): about
# what 80% of its charts' own promises are met by in the replay of the live loop's fair order
# (`tools.baselines.replay_loop`), so that 10-30% miss there.
TURNAROUNDS = {
    "backfill": 250.0,
    "firehose": 120.0,
    "gold": 56.0,
    "silver": 50.0,
    "slow": 130.0,
    "flaky": 145.0,
    "partner": 155.0,
    "held": 160.0,
    "drift": 47.0,
    "small": 20.0,
}
# A chart's own promise: its org's target x a factor drawn uniformly in this range.
PROMISE_FACTORS = (0.5, 1.5)
PROVIDER = "partner-api"


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    cost: int = 1
    fail_probability: float = 0.0
    provider: str | None = None


@dataclass(frozen=True)
class OrgSpec:
    slug: str
    kind: str
    workflow: str
    weight: int = 1
    held_until: float | None = None  # held from the start until then
    turnaround: float | None = None  # its turnaround target, seconds (`Org.turnaround`)


@dataclass(frozen=True)
class PlannedChart:
    org: str
    external_id: str
    workflow: str
    submit_at: float
    duration: float
    due_in: float | None = None  # its own promise: due this long after its submission


@dataclass(frozen=True)
class ProviderPauseSpec:
    provider: str
    start: float
    end: float


@dataclass(frozen=True)
class DriftSpec:
    """From `at` s on, the charts `org` submits of `workflow` take `factor` times as long."""

    org: str
    workflow: str
    at: float
    factor: float


@dataclass(frozen=True)
class Workload:
    seed: int
    seconds: float
    budget: int
    orgs: list[OrgSpec]
    workflows: list[WorkflowSpec]
    charts: list[PlannedChart]
    pauses: list[ProviderPauseSpec] = field(default_factory=list)
    drift: DriftSpec | None = None

    @property
    def mean_duration(self) -> float:
        """The mean of a standard chart's duration: the default the ETAs start from."""
        return MEDIAN_SECONDS * math.exp(SIGMA * SIGMA / 2)

    def org(self, slug: str) -> OrgSpec:
        return next(org for org in self.orgs if org.slug == slug)

    def workflow(self, name: str) -> WorkflowSpec:
        return next(workflow for workflow in self.workflows if workflow.name == name)


WORKFLOWS = [
    WorkflowSpec("standard"),
    WorkflowSpec("slow", cost=2),
    WorkflowSpec("flaky", fail_probability=0.3),
    WorkflowSpec("partner-api", provider=PROVIDER),
]


def build(*, seconds: float = 180.0, budget: int = 8, seed: int = 7, small_orgs: int = 8) -> Workload:
    """The workload of a run whose submissions last `seconds` (see the module docstring)."""
    rng = random.Random(seed)
    k = seconds / 180.0
    charts: list[PlannedChart] = []

    def duration(median: float) -> float:
        return round(max(MIN_DURATION, median * math.exp(rng.gauss(0.0, SIGMA))), 3)

    def add(org: str, workflow: str, at: float, count: int = 1, median: float = MEDIAN_SECONDS) -> None:
        for _ in range(count):
            index = sum(1 for chart in charts if chart.org == org)
            charts.append(PlannedChart(org, f"{org}-{index:04d}", workflow, round(at, 3), duration(median)))

    orgs = [
        OrgSpec("backfill", "backfill", "standard"),
        OrgSpec("firehose", "firehose", "standard"),
        OrgSpec("gold", "weighted", "standard", weight=3),
        OrgSpec("silver", "weighted", "standard", weight=2),
        OrgSpec("slow", "slow", "slow"),
        OrgSpec("flaky", "flaky", "flaky"),
        OrgSpec("partner", "provider", "partner-api"),
        OrgSpec("held", "held", "standard", held_until=round(0.45 * seconds, 3)),
        OrgSpec("drift", "drift", "standard"),
    ]
    add("backfill", "standard", 0.0, count=round(120 * k))
    add("held", "standard", 0.0, count=max(3, round(15 * k)))
    for second in range(0, int(seconds), 2):
        add("firehose", "standard", second + rng.uniform(0, 0.5))
    add("gold", "standard", 5.0, count=max(6, round(36 * k)))
    add("silver", "standard", 5.0, count=max(4, round(24 * k)))
    add("slow", "slow", 8.0, count=max(3, round(12 * k)), median=MEDIAN_SECONDS * SLOW_FACTOR)
    add("flaky", "flaky", 10.0, count=max(4, round(25 * k)))
    add("partner", "partner-api", 12.0, count=max(4, round(25 * k)))
    for index in range(small_orgs):
        slug = f"small-{index + 1:02d}"
        orgs.append(OrgSpec(slug, "small", "standard"))
        arrival = seconds * (0.1 + 0.6 * index / max(1, small_orgs - 1)) + rng.uniform(0, 3)
        add(slug, "standard", arrival, count=3)
        at = arrival + rng.uniform(15, 30)
        while at < 0.8 * seconds:
            add(slug, "standard", at)
            at += rng.uniform(15, 30)
    # Drawn last, so that the rest of the workload is what it was without the drift phase.
    drift = DriftSpec("drift", "standard", round(DRIFT_AT * seconds, 3), DRIFT_FACTOR)
    at = 0.05 * seconds
    while at < 0.8 * seconds:
        add("drift", "standard", at, median=MEDIAN_SECONDS * (DRIFT_FACTOR if at >= drift.at else 1.0))
        at += rng.uniform(4, 6)
    charts.sort(key=lambda chart: (chart.submit_at, chart.org, chart.external_id))
    # The promises, from a generator of their own: the rest of the workload is what it was without them.
    orgs = [
        replace(org, turnaround=round(TURNAROUNDS[org.slug if org.kind != "small" else "small"] * k, 1)) for org in orgs
    ]
    target = {org.slug: org.turnaround for org in orgs}
    promise = random.Random(f"{seed}/due")
    charts = [
        replace(chart, due_in=round(target[chart.org] * promise.uniform(*PROMISE_FACTORS), 3))  # type: ignore[operator]
        for chart in charts
    ]
    pauses = [ProviderPauseSpec(PROVIDER, round(0.4 * seconds, 3), round(0.52 * seconds, 3))]
    return Workload(seed, seconds, budget, orgs, list(WORKFLOWS), charts, pauses, drift)
