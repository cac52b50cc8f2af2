"""The replan pass on PostgreSQL: the plan table, ETA bands per chart and per org, clear-times, samples."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from charts.models import Chart, ChartPlan, ChartState
from charts.services import ChartRequest, chart_cancel, chart_pause, chart_submit_bulk
from charts.states import transition_if
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.models import Org
from orgs.services import provider_pause
from scheduling import core, replan
from scheduling.dispatch import Choice, _claim
from scheduling.models import QueueSample
from scheduling.reconcile import duration_record
from scheduling.replan import plan_refresh
from scheduling.snapshot import load_snapshot
from tests.factories import ChartFactory, OrgFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db
ACTOR = Actor("user:test", staff=True)


@pytest.fixture
def backlog() -> tuple[Org, Org]:
    scheduler_config_set(actor=ACTOR, budget=1)
    workflow = WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme", weight=2), OrgFactory(slug="beta")
    for seconds in (40, 60, 90):  # learned durations with a spread
        duration_record(org_id=acme.pk, workflow_id=workflow.pk, seconds=seconds)
    for org, count in ((acme, 4), (beta, 2)):
        chart_submit_bulk(org=org, items=[ChartRequest("w", f"{org.slug}{i}") for i in range(count)], actor=ACTOR)
    return acme, beta


def test_the_plan_is_dense_positions_with_bands(backlog: tuple[Org, Org]) -> None:
    result = plan_refresh()
    assert result.ordered == 6
    charts = list(Chart.objects.order_by("position"))
    assert [chart.position for chart in charts] == list(range(6))  # type: ignore[attr-defined]
    assert [chart.external_id for chart in charts] == ["acme0", "acme1", "beta0", "acme2", "acme3", "beta1"]
    for chart in charts:
        assert chart.eta_low < chart.eta < chart.eta_high  # type: ignore[attr-defined]
        assert chart.predicted_start < chart.eta  # type: ignore[attr-defined]
    assert ChartPlan.objects.count() == 6


def test_orgs_get_a_clear_time_with_its_band_and_a_sample_is_kept(backlog: tuple[Org, Org]) -> None:
    plan_refresh()
    for org in Org.objects.all():
        assert org.clear_low is not None
        assert org.clear_at is not None
        assert org.clear_high is not None
        assert org.clear_low < org.clear_at < org.clear_high
    last = Chart.objects.order_by("-position").first()
    assert Org.objects.get(slug="beta").clear_at == last.eta  # type: ignore[union-attr, attr-defined]
    sample = QueueSample.objects.get()
    assert (sample.queued, sample.running, sample.budget) == (6, 0, 1)
    assert sample.per_org["acme"]["queued"] == 4


def test_a_chart_leaving_the_queue_leaves_the_plan_at_once(backlog: tuple[Org, Org]) -> None:
    plan_refresh()
    first, second = Chart.objects.order_by("position")[:2]
    chart_cancel(chart=first, actor=ACTOR)
    chart_pause(chart=second, actor=ACTOR)
    assert not ChartPlan.objects.filter(chart_id__in=[first.pk, second.pk]).exists()
    plan_refresh()
    positions = Chart.objects.filter(plan__position__isnull=False).values_list("plan__position", flat=True)
    assert sorted(positions) == [0, 1, 2, 3]


def test_a_held_org_has_no_plan_and_no_clear_time(backlog: tuple[Org, Org]) -> None:
    from orgs.services import org_hold

    org_hold(org=Org.objects.get(slug="beta"), actor=ACTOR)
    plan_refresh()
    beta = Org.objects.get(slug="beta")
    assert beta.clear_at is None
    assert set(Chart.objects.filter(org=beta).values_list("plan__position", flat=True)) == {None}


def test_a_pass_is_due_once_per_interval() -> None:
    from django.core.cache import cache

    from scheduling.tasks import LAST_RUN_KEY, _due

    cache.delete(LAST_RUN_KEY.format("probe"))
    assert _due("probe", 30)
    assert not _due("probe", 30)
    assert _due("probe", 0.5)  # at or under beat's tick: every tick
    cache.delete(LAST_RUN_KEY.format("probe"))


def _gamma_submitted(*, every: float) -> Org:
    """gamma submitted 30 charts, one every `every` seconds up to now (0: in one bulk), all done."""
    gamma = OrgFactory(slug="gamma")
    chart_submit_bulk(org=gamma, items=[ChartRequest("w", f"g{i}") for i in range(30)], actor=ACTOR)
    now = timezone.now()
    for index, chart_id in enumerate(Chart.objects.filter(org=gamma).order_by("id").values_list("id", flat=True)):
        created = now - timedelta(seconds=every * (29.5 - index))
        Chart.objects.filter(pk=chart_id).update(state="succeeded", created_at=created)
    return gamma


def _etas(*, window: float, now: datetime) -> dict[str, datetime]:
    scheduler_config_set(actor=ACTOR, arrival_window=window)
    plan_refresh(now=now)
    return {chart.external_id: chart.eta for chart in Chart.objects.filter(plan__isnull=False)}  # type: ignore[attr-defined]


def test_the_etas_expect_an_org_that_keeps_submitting_to_go_on(backlog: tuple[Org, Org]) -> None:
    # gamma submitted a chart every 20 s over the last 10 minutes: it is expected to go on, and its
    # charts take their turns ahead of the backlog's later charts.
    _gamma_submitted(every=20)
    now = timezone.now()
    without = _etas(window=0, now=now)
    expected = _etas(window=600, now=now)
    charts = Chart.objects.filter(plan__isnull=False).order_by("position")
    assert [chart.external_id for chart in charts] == ["acme0", "acme1", "beta0", "acme2", "acme3", "beta1"]
    assert set(expected) == set(without)  # gamma's expected charts are never written
    assert expected["acme0"] == without["acme0"]  # the head starts now either way
    assert expected["beta1"] > without["beta1"]
    assert not Org.objects.get(slug="gamma").clear_at


def test_a_bulk_upload_is_not_expected_to_repeat(backlog: tuple[Org, Org]) -> None:
    _gamma_submitted(every=0)
    now = timezone.now()
    assert _etas(window=600, now=now) == _etas(window=0, now=now)


def test_the_snapshot_passes_the_recent_submissions_grouped_by_second(backlog: tuple[Org, Org]) -> None:
    from orgs.services import org_hold
    from scheduling.snapshot import HISTORY_WINDOWS, load_snapshot

    scheduler_config_set(actor=ACTOR, arrival_window=60)
    gamma = _gamma_submitted(every=20)  # 30 charts over 600 s: those of the last 300 s count
    snapshot = load_snapshot()
    history = snapshot.scenario.history
    assert history is not None
    assert history.decay == 60
    by_org: dict[str, int] = {}
    for submission in history.submissions:
        by_org[submission.org] = by_org.get(submission.org, 0) + submission.count
    acme, beta = backlog
    assert by_org == {str(acme.pk): 4, str(beta.pk): 2, str(gamma.pk): HISTORY_WINDOWS * 60 // 20}
    assert len([s for s in history.submissions if s.org == str(acme.pk)]) == 1  # one bulk, one row
    # Complete from the start of the span (charts exist from before it).
    assert history.since == pytest.approx(snapshot.scenario.now - HISTORY_WINDOWS * 60, abs=1)
    org_hold(org=gamma, actor=ACTOR)
    held = load_snapshot().scenario.history
    assert held is not None
    assert str(gamma.pk) not in {submission.org for submission in held.submissions}
    scheduler_config_set(actor=ACTOR, arrival_window=0)
    assert load_snapshot().scenario.history is None


def test_charts_of_one_bulk_keep_their_order_across_a_digit_boundary() -> None:
    # One bulk shares one created_at, so the order inside the org falls to the chart id: 999 before 1000.
    scheduler_config_set(actor=ACTOR, budget=1)
    workflow, org = WorkflowFactory(name="w"), OrgFactory(slug="acme")
    created = timezone.now()
    for chart_id in (1000, 998, 999):
        ChartFactory(id=chart_id, org=org, workflow=workflow, created_at=created)
    plan_refresh()
    assert list(Chart.objects.order_by("plan__position").values_list("id", flat=True)) == [998, 999, 1000]


def test_each_waiting_chart_gets_its_reason_from_the_walk() -> None:
    """Budget 3, c0 running: the walk starts a0 and b0 and stops at a1; the rest are each held
    by what the walk met."""
    now = timezone.now()
    scheduler_config_set(actor=ACTOR, budget=3)
    plain, limited = WorkflowFactory(name="plain"), WorkflowFactory(name="limited", provider=ProviderFactory())
    acme, beta = OrgFactory(slug="acme"), OrgFactory(slug="beta")
    capped, held = OrgFactory(slug="capped", max_concurrency=1), OrgFactory(slug="held", weight=0)
    ages = iter(range(100, 0, -1))

    def chart(org: Org, name: str, **fields: object) -> Chart:
        created = now - timedelta(seconds=next(ages))
        workflow = fields.pop("workflow", plain)
        return ChartFactory(org=org, workflow=workflow, external_id=name, created_at=created, **fields)

    chart(acme, "a0"), chart(beta, "b0"), chart(acme, "a1"), chart(beta, "b1"), chart(acme, "a2")
    chart(capped, "c0", state="running", started_at=now)
    chart(capped, "c1")
    chart(beta, "retry", state="retry_wait", attempt=1, available_at=now + timedelta(minutes=5))
    chart(beta, "throttled", workflow=limited)
    chart(held, "h0")
    chart_pause(chart=chart(acme, "p0"), actor=ACTOR)
    provider_pause(provider=limited.provider, until=now + timedelta(minutes=7), actor=ACTOR)

    plan_refresh(now=now)
    found = {
        c.external_id: (c.waiting_reason, c.waiting_until, c.head_of_line)  # type: ignore[attr-defined]
        for c in Chart.objects.exclude(external_id="c0")
    }
    predicted = {c.external_id: c.predicted_start for c in Chart.objects.all()}  # type: ignore[attr-defined]
    assert found == {
        "a0": ("", None, None),
        "b0": ("", None, None),
        "a1": ("budget", predicted["a1"], None),
        "b1": ("turn", predicted["b1"], None),
        "a2": ("turn", predicted["a2"], None),
        "c1": ("org_cap", predicted["c1"], None),
        "retry": ("backoff", now + timedelta(minutes=5), None),
        "throttled": ("provider_paused", now + timedelta(minutes=7), None),
        "h0": ("org_held", None, None),
        "p0": ("chart_paused", None, None),
    }


# position, predicted start, ETA, its band, why it waits, until when, behind which head of line
PlanRow = tuple[int | None, float | None, float | None, float | None, float | None, str, float | None, int | None]


def _plan_rows() -> dict[int, PlanRow]:
    """The plan table, each time as seconds since the epoch."""

    def seconds(moment: datetime | None) -> float | None:
        return None if moment is None else moment.timestamp()

    return {
        chart_id: (position, seconds(start), seconds(eta), seconds(low), seconds(high), reason, seconds(until), head)
        for chart_id, position, start, eta, low, high, reason, until, head in ChartPlan.objects.values_list(
            "chart_id", "position", "predicted_start", "eta", "eta_low", "eta_high", "waiting_reason",
            "waiting_until", "head_of_line",
        )
    }  # fmt: skip


def _expected_rows(plan: core.Plan) -> dict[int, PlanRow]:
    position = {chart_id: index for index, chart_id in enumerate(plan.order)}
    head = plan.head_of_line
    return {
        int(chart_id): (
            position.get(chart_id),
            start,
            plan.eta[chart_id],
            plan.eta_low[chart_id],
            plan.eta_high[chart_id],
            plan.reason[chart_id] or "",
            plan.waiting_until[chart_id],
            None if head[chart_id] is None else int(head[chart_id]),  # type: ignore[arg-type]
        )
        for chart_id, start in plan.start.items()
    }


def _assert_rows_are(rows: dict[int, PlanRow], expected: dict[int, PlanRow]) -> None:
    """The same charts, each with the same place and the same times to the microsecond."""
    assert rows.keys() == expected.keys()
    for chart_id, row in expected.items():
        assert rows[chart_id] == pytest.approx(row, abs=1e-6), chart_id


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[core.Plan]:
    """Every plan the replans of the test compute, in order."""
    plans: list[core.Plan] = []
    compute = core.plan

    def plan_and_keep(scenario: core.Scenario) -> core.Plan:
        plans.append(compute(scenario))
        return plans[-1]

    monkeypatch.setattr(core, "plan", plan_and_keep)
    return plans


@pytest.mark.parametrize("block_rows", [replan.PLAN_BLOCK_ROWS, 2])  # one block, or several
def test_every_row_of_the_plan_table_is_the_new_plan_after_charts_moved(
    backlog: tuple[Org, Org], planned: list[core.Plan], monkeypatch: pytest.MonkeyPatch, block_rows: int
) -> None:
    monkeypatch.setattr(replan, "PLAN_BLOCK_ROWS", block_rows)
    _acme, beta = backlog
    plan_refresh()
    before = _plan_rows()
    _assert_rows_are(before, _expected_rows(planned[0]))
    # Between two replans: beta outweighs acme now (charts move), a chart finished behind the
    # replan's back (its row is stale), one more chart arrives (no row yet).
    Org.objects.filter(pk=beta.pk).update(weight=5)
    finished = Chart.objects.get(external_id="acme1")
    Chart.objects.filter(pk=finished.pk).update(state="succeeded")
    chart_submit_bulk(org=beta, items=[ChartRequest("w", "beta-late")], actor=ACTOR)
    late = Chart.objects.get(external_id="beta-late")

    plan_refresh()
    after = _plan_rows()
    _assert_rows_are(after, _expected_rows(planned[1]))
    assert finished.pk not in after
    assert after[late.pk][0] is not None
    moved = [chart_id for chart_id in before.keys() & after.keys() if before[chart_id][0] != after[chart_id][0]]
    assert moved  # some charts changed places, and each holds its new one (above)


def _plan_table_catalog() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s"
            " UNION ALL SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass"
            " UNION ALL SELECT relname, array_to_string(reloptions, ',') FROM pg_class WHERE relname LIKE %s"
            " ORDER BY 1",
            [ChartPlan._meta.db_table, ChartPlan._meta.db_table, ChartPlan._meta.db_table + "%"],
        )
        return cursor.fetchall()


def test_the_new_plan_table_has_the_old_one_s_name_indexes_and_constraints(backlog: tuple[Org, Org]) -> None:
    plan_refresh()
    catalog = _plan_table_catalog()
    assert (
        "chart_plan_position_idx",
        'CREATE INDEX chart_plan_position_idx ON public.charts_chartplan USING btree ("position")',
    ) in catalog
    assert ("charts_chartplan_pkey", "PRIMARY KEY (chart_id)") in catalog
    plan_refresh()
    assert _plan_table_catalog() == catalog  # and no table left aside


@pytest.mark.django_db(transaction=True)
def test_a_submit_a_claim_and_a_pause_during_a_replan_are_all_kept(
    backlog: tuple[Org, Org], monkeypatch: pytest.MonkeyPatch
) -> None:
    _acme, beta = backlog
    plan_refresh()
    first, second, third = Chart.objects.order_by("position")[:3]
    computed, resume_plan, swapped, resume_commit = (threading.Event() for _ in range(4))
    compute, swap = core.plan, replan._swap_in_next_plan

    def plan_then_wait(scenario: core.Scenario) -> core.Plan:
        result = compute(scenario)
        computed.set()
        resume_plan.wait(10)
        return result

    def swap_then_wait(indexes: list[replan.PlanIndex]) -> None:
        swap(indexes)
        swapped.set()
        resume_commit.wait(10)

    monkeypatch.setattr(core, "plan", plan_then_wait)
    monkeypatch.setattr(replan, "_swap_in_next_plan", swap_then_wait)
    replanning = _in_thread(plan_refresh)

    # 1. While the plan is computed from a snapshot that saw neither, a submit and a claim commit.
    assert computed.wait(10)
    chart_submit_bulk(org=beta, items=[ChartRequest("w", "beta-late")], actor=ACTOR)
    assert transition_if(first.pk, [ChartState.QUEUED], ChartState.DISPATCHING, actor=ACTOR, claimed_at=timezone.now())
    resume_plan.set()
    # 2. While the swap holds the plan table's lock, a pause waits for it (to drop the chart's row).
    assert swapped.wait(10)
    pausing = _in_thread(lambda: chart_pause(chart=Chart.objects.get(pk=third.pk), actor=ACTOR))
    _wait_for_a_lock_wait()
    resume_commit.set()
    replanning.join(10)
    pausing.join(10)
    assert not replanning.is_alive()
    assert not pausing.is_alive()

    claimed = Chart.objects.get(pk=first.pk)
    assert claimed.state == ChartState.DISPATCHING  # the replan writes no chart row
    assert claimed.predicted_start is not None  # type: ignore[attr-defined]
    assert claimed.eta is not None  # type: ignore[attr-defined]
    assert Chart.objects.get(pk=third.pk).state == ChartState.PAUSED
    assert not ChartPlan.objects.filter(chart_id=third.pk).exists()  # dropped from the new table
    assert Chart.objects.get(pk=second.pk).position is not None  # type: ignore[attr-defined]
    late = Chart.objects.get(external_id="beta-late")
    assert late.state == ChartState.QUEUED
    monkeypatch.setattr(core, "plan", compute)
    monkeypatch.setattr(replan, "_swap_in_next_plan", swap)
    plan_refresh()
    assert Chart.objects.get(pk=late.pk).position is not None  # type: ignore[attr-defined]


def _in_thread(work: Callable[[], object], errors: list[BaseException] | None = None) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as error:
            if errors is None:
                raise
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_for_a_lock_wait(relation: str | None = ChartPlan._meta.db_table) -> None:
    """Until some session waits for a lock on `relation` (None: on anything; 10 s at most)."""
    with connection.cursor() as cursor:
        for _ in range(1000):
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND (%s::text IS NULL OR relation = %s::regclass)",
                [relation, relation],
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError(f"nobody waited for a lock on {relation or 'anything'}")


def _plan_table_persistence() -> list[str]:
    """relpersistence of every table named like the plan table (u: unlogged)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relpersistence FROM pg_class WHERE relkind = 'r' AND relname LIKE %s",
            [ChartPlan._meta.db_table + "%"],
        )
        return [persistence for (persistence,) in cursor.fetchall()]


def test_the_plan_table_is_unlogged_from_its_migration_and_after_each_replan(backlog: tuple[Org, Org]) -> None:
    assert _plan_table_persistence() == ["u"]
    plan_refresh()
    assert _plan_table_persistence() == ["u"]


@pytest.mark.parametrize("failing_step", ["copy", "sample", "swap"])
def test_a_replan_that_fails_before_its_commit_leaves_the_old_plan_whole(
    backlog: tuple[Org, Org], monkeypatch: pytest.MonkeyPatch, failing_step: str
) -> None:
    _acme, beta = backlog
    plan_refresh()
    before = _plan_rows()
    Org.objects.filter(pk=beta.pk).update(weight=5)  # the next plan differs
    time_columns, blocks = replan._time_columns, []

    def fail(*args: object, **kwargs: object) -> Any:
        if failing_step == "copy" and not blocks:  # the first block goes to the server, the second fails
            blocks.append(args)
            return time_columns(*args, **kwargs)  # type: ignore[arg-type]
        if failing_step == "swap":  # halfway through the swap: the plan table is gone
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE {ChartPlan._meta.db_table}")
        raise RuntimeError("the replan's process died here")

    monkeypatch.setattr(replan, "PLAN_BLOCK_ROWS", 2)
    step = {"copy": "_time_columns", "sample": "_write_sample", "swap": "_swap_in_next_plan"}[failing_step]
    monkeypatch.setattr(replan, step, fail)
    with pytest.raises(RuntimeError):
        plan_refresh()

    assert _plan_rows() == before
    assert _plan_table_persistence() == ["u"]  # and no next table left aside
    monkeypatch.undo()
    plan_refresh()
    assert _plan_rows() != before


def test_a_plan_of_a_scenario_other_than_its_snapshot_s_rows_is_refused(backlog: tuple[Org, Org]) -> None:
    """The plan's rows take their chart ids from the snapshot's rows by the plan's places in the
    scenario: a scenario reordered after the load would write one chart's plan under another's id,
    so the writer refuses it and the plan table keeps the last plan."""
    plan_refresh()
    before = _plan_rows()
    snapshot = load_snapshot()
    queued = list(snapshot.scenario.queued)
    reordered = dataclasses.replace(snapshot, scenario=dataclasses.replace(snapshot.scenario, queued=queued[::-1]))
    with pytest.raises(ValueError, match="queued rows are not its scenario's queued charts"):
        replan.write_plan(reordered, core.plan(reordered.scenario))
    assert _plan_rows() == before


def test_a_scenario_with_two_charts_swapped_inside_the_queue_is_refused(backlog: tuple[Org, Org]) -> None:
    """Alignment is checked chart by chart: the same count and the same ends, but two charts
    exchanged in the middle, would write each one's plan under the other's id."""
    snapshot = load_snapshot()
    queued = list(snapshot.scenario.queued)
    assert len(queued) >= 4
    queued[1], queued[2] = queued[2], queued[1]
    swapped = dataclasses.replace(snapshot, scenario=dataclasses.replace(snapshot.scenario, queued=queued))
    with pytest.raises(ValueError, match="queued rows are not its scenario's queued charts"):
        replan.write_plan(swapped, core.plan(swapped.scenario))


@pytest.mark.parametrize("keys", [[None, None, None], [None, 7, None], [2**62, 3, None]])
def test_heads_of_line_are_chart_ids_or_null(keys: list[int | None]) -> None:
    column = replan._chart_id_column(keys)
    ids = [None if column.null is not None and column.null[i] else int(column.values[i]) for i in range(len(keys))]
    assert ids == keys


@pytest.mark.django_db(transaction=True)
def test_a_claim_during_a_replan_s_swap_does_not_deadlock_with_it(
    backlog: tuple[Org, Org], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replan writes every org's row (clear-times, `served`) and then takes the plan table's
    exclusive lock for its swap; a claim writes its chart's plan row and its org's `served`. Found
    on `make run`: when the claim took the plan row first, each waited for the other, and PostgreSQL
    killed one of them (`deadlock detected`) a few times a minute."""
    acme, _beta = backlog
    plan_refresh()
    chart = Chart.objects.filter(org=acme).order_by("position").first()
    assert chart is not None
    choice = Choice(chart, cost=1, service=0.5)  # a fair-tier start: its org's virtual time moves
    orgs_written, resume_swap = threading.Event(), threading.Event()
    swap = replan._swap_in_next_plan

    def wait_then_swap(indexes: list[replan.PlanIndex]) -> None:
        orgs_written.set()  # the org rows are this replan's until its commit
        resume_swap.wait(10)
        swap(indexes)

    monkeypatch.setattr(replan, "_swap_in_next_plan", wait_then_swap)
    errors: list[BaseException] = []
    replanning = _in_thread(plan_refresh, errors)
    assert orgs_written.wait(10)
    claiming = _in_thread(lambda: _claim(choice), errors)
    _wait_for_a_lock_wait(relation=None)  # the claim waits for its org's row
    resume_swap.set()
    replanning.join(15)
    claiming.join(15)
    assert not replanning.is_alive()
    assert not claiming.is_alive()
    assert errors == []
    claimed = Chart.objects.get(pk=chart.pk)
    assert claimed.state == ChartState.DISPATCHING
    assert Org.objects.get(pk=acme.pk).served == pytest.approx(acme.served + 0.5)


def test_a_chart_of_a_workflow_never_seen_gets_a_band(settings: Any) -> None:
    """Nothing has finished anywhere: the default duration carries FAIRSCHED_DEFAULT_DURATION_SPREAD."""
    settings.FAIRSCHED_DEFAULT_DURATION_SPREAD = 0.5
    scheduler_config_set(actor=ACTOR, budget=1)
    WorkflowFactory(name="new")
    org = OrgFactory(slug="acme")
    chart_submit_bulk(org=org, items=[ChartRequest("new", f"n{i}") for i in range(2)], actor=ACTOR)
    plan_refresh()
    for chart in Chart.objects.all():
        assert chart.eta_low < chart.eta < chart.eta_high  # type: ignore[attr-defined]
