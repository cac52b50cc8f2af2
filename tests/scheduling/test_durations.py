"""What the ETAs learn from finished runs (`duration_record`): one run far outside what a workflow
usually takes (it ran across an outage of the workers, say) barely moves the learned mean, a
lasting change of a workflow's duration is learned within a few runs, and the row holds what the
pure rule (`core.durations`, tested in tests/scheduling/core/test_durations.py) computes."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from charts.models import DurationStat
from scheduling import dispatch as dispatch_module
from scheduling import reconcile as reconcile_module
from scheduling.core.durations import DURATION_MEMORY, DurationState, duration_learn
from scheduling.reconcile import duration_record, reconcile_run
from scheduling.snapshot import duration_state
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db


def learned(tenants: Tenants) -> DurationStat:
    return DurationStat.objects.get(org=tenants.org_a, workflow=tenants.workflow)


def record(tenants: Tenants, durations: list[float]) -> DurationStat:
    for seconds in durations:
        duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=seconds)
    return learned(tenants)


def test_the_first_runs_are_learned_as_they_are(tenants: Tenants) -> None:
    durations = [10.0, 100.0, 1000.0]
    stat = record(tenants, durations)
    assert stat.count == 3
    assert stat.mean == pytest.approx(370.0)
    assert stat.log_sigma == pytest.approx(math.sqrt(2 / 3) * math.log(10))


def test_a_run_across_an_outage_barely_moves_the_learned_mean(tenants: Tenants) -> None:
    """Found on `make run`: runs of ~8 s in flight when the stack stopped for ten minutes finished
    after its restart at ~610 s each, and the learned mean of a few runs went from 8 s to over a
    minute: every ETA of the queue jumped fivefold ("all clear in 14m" became "in 1h05m")."""
    stat = record(tenants, [7.0, 8.0, 9.0] * 4 + [610.0])
    assert stat.mean == pytest.approx(8.0, rel=0.25)
    assert stat.log_sigma is not None
    assert stat.log_sigma < 0.5


def test_a_young_pair_is_clipped_against_its_workflow_over_every_org(tenants: Tenants) -> None:
    """The other org's runs of the workflow tell what it usually takes while this org has run it once."""
    for seconds in [7.0, 8.0, 9.0] * 4:
        duration_record(org_id=tenants.org_b.pk, workflow_id=tenants.workflow.pk, seconds=seconds)
    stat = record(tenants, [8.0, 610.0])
    assert stat.mean == pytest.approx(8.0, rel=0.25)
    assert stat.count == 1  # the far run is held out: a lasting change would take three more like it
    assert stat.streak == 1


def test_a_lasting_change_of_duration_is_learned(tenants: Tenants) -> None:
    stat = record(tenants, [10.0] * 200 + [40.0] * 3 * DURATION_MEMORY)
    assert stat.mean == pytest.approx(40.0, rel=0.05)
    assert stat.count == DURATION_MEMORY


def test_the_spread_of_a_widely_varying_workflow_is_kept(tenants: Tenants) -> None:
    """Clipping stays outside the spread a workflow shows: one whose runs take 1 s to 1000 s keeps
    its mean and spread."""
    durations = [1.0, 10.0, 100.0, 1000.0] * 50
    stat = record(tenants, durations)
    assert stat.mean == pytest.approx(sum(durations) / len(durations), rel=0.1)
    assert stat.log_sigma == pytest.approx(math.sqrt(1.25) * math.log(10), rel=0.1)


def test_a_workflow_four_times_slower_is_learned_within_ten_runs(tenants: Tenants) -> None:
    """Measured before: after a step x4 (log-sigma 0.2) the mean was 9.3 s after 10 runs against 32.6 s."""
    rng = random.Random(7)
    steady = [8.0 * math.exp(rng.gauss(0, 0.2)) for _ in range(100)]
    slower = [32.0 * math.exp(rng.gauss(0, 0.2)) for _ in range(10)]
    stat = record(tenants, steady + slower)
    assert stat.mean == pytest.approx(32.0 * math.exp(0.02), rel=0.25)


def test_the_row_holds_what_the_pure_rule_computes(tenants: Tenants) -> None:
    """Steady runs, a lone outlier, a step change and a step back: the row read back is the state
    that folding `duration_learn` over the same runs gives."""
    rng = random.Random(3)
    runs = [10.0 * math.exp(rng.gauss(0, 0.3)) for _ in range(20)] + [750.0]
    runs += [40.0 * math.exp(rng.gauss(0, 0.3)) for _ in range(20)] + [5.0] * 60
    state = DurationState()
    for seconds in runs:
        state = duration_learn(state, seconds)
    stored = duration_state(record(tenants, runs))
    assert stored.count == state.count
    assert stored.learned == state.learned > DURATION_MEMORY  # past the memory: its runs in flight fade
    assert stored.streak == state.streak
    for name in ("mean_seconds", "mean_log", "var_log", "streak_seconds", "streak_log"):
        assert getattr(stored, name) == pytest.approx(getattr(state, name), rel=1e-9, abs=1e-9), name


def test_a_bulk_upload_s_finish_order_is_no_lasting_change(tenants: Tenants) -> None:
    """Runs started together finish shortest first; their starts, kept on the row, tell that order
    from a change (the rule: tests/scheduling/core/test_durations.py), so a bulk's long tail in a row
    leaves the pair's memory as it was."""
    rng, began = random.Random(3), timezone.now() - timedelta(hours=2)
    at = began
    for _ in range(60):
        seconds = 8.0 * math.exp(rng.gauss(0.0, 0.25))
        duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=seconds, started=at)
        at += timedelta(seconds=seconds)
    bulk = sorted(8.0 * math.exp(rng.gauss(0.0, 0.25)) for _ in range(120))
    for seconds in bulk:
        duration_record(org_id=tenants.org_a.pk, workflow_id=tenants.workflow.pk, seconds=seconds, started=at)
    stat = learned(tenants)
    assert stat.count == DURATION_MEMORY
    assert stat.settled_started_at == at
    assert stat.mean == pytest.approx(8.0 * math.exp(0.25**2 / 2), rel=0.35)


def test_a_reconciled_run_is_learned_with_its_start_in_temporal(
    tenants: Tenants, monkeypatch: pytest.MonkeyPatch, announced: Any
) -> None:
    """The start the rule reads is the run's in Temporal (what its duration is measured from)."""
    from tests.scheduling.test_reconcile import FakeTemporal, start, submit

    fake = FakeTemporal()
    monkeypatch.setattr(dispatch_module, "start_chart_workflow", fake.start)
    monkeypatch.setattr(reconcile_module, "describe_workflow", fake.describe)
    monkeypatch.setattr(reconcile_module, "list_open_workflow_ids", lambda: set())
    record(tenants, [0.001, 0.01, 0.1, 1.0, 0.01, 0.1])  # wide: the fake run lasts what the test takes
    (chart,) = submit(tenants.org_a, tenants.workflow)
    running = start(chart)
    fake.close(running.temporal_workflow_id, "completed")
    reconcile_run()
    assert learned(tenants).settled_started_at == fake.outcomes[running.temporal_workflow_id].start_time
