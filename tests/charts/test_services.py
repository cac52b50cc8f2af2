"""Writes on charts: idempotent, all-or-nothing submission with admission, and the operators' levers."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from charts import services
from charts.models import PLAN_FIELDS, Chart, ChartEvent, ChartPlan, ChartState, DurationStat
from charts.services import ChartRequest
from common.actors import Actor
from common.errors import BulkInvalid, Conflict, InvalidInput, NotFound, QueueFull
from common.events import STAFF_GROUP, org_group
from knobs.services import scheduler_config_set
from orgs.models import Org, OrgChange
from tests.conftest import Announcements, CallerFailed, Tenants, fail_after
from tests.factories import ChartFactory, OrgFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

ACTOR = Actor("user:alice", staff=True)


def submit(org: Org, external_id: str, workflow: str = "render", **kwargs: Any) -> tuple[Chart, bool]:
    return services.chart_submit(org=org, workflow=workflow, external_id=external_id, actor=ACTOR, **kwargs)


def chart_in(tenants: Tenants, state: str, **fields: Any) -> Chart:
    return ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state, **fields)


# chart_submit


def test_submit_creates_a_queued_chart_and_logs_its_birth(tenants: Tenants) -> None:
    chart, created = submit(tenants.org_a, "job-1", payload={"size": 3}, high_priority=True, priority=5)
    assert created
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.org, stored.workflow, stored.external_id, stored.state) == (
        tenants.org_a,
        tenants.workflow,
        "job-1",
        ChartState.QUEUED,
    )
    assert (stored.payload, stored.high_priority, stored.priority, stored.attempt) == ({"size": 3}, True, 5, 0)
    event = ChartEvent.objects.get(chart=chart)
    assert (event.from_state, event.to_state, event.actor, event.reason) == ("", "queued", ACTOR.name, "submitted")


def test_the_same_submission_twice_gives_the_same_chart(tenants: Tenants) -> None:
    first, created = submit(tenants.org_a, "job-1")
    again, created_again = submit(tenants.org_a, "job-1", payload={"ignored": True})
    assert (created, created_again) == (True, False)
    assert again.pk == first.pk
    assert Chart.objects.count() == 1
    assert ChartEvent.objects.count() == 1
    # The same external id in another org is another chart.
    other, created_other = submit(tenants.org_b, "job-1")
    assert created_other
    assert other.pk != first.pk


def test_the_same_external_id_with_another_workflow_is_a_conflict(tenants: Tenants) -> None:
    WorkflowFactory(name="simulate")
    submit(tenants.org_a, "job-1")
    with pytest.raises(Conflict) as error:
        submit(tenants.org_a, "job-1", workflow="simulate")
    assert (error.value.field, error.value.status) == ("external_id", 409)
    assert Chart.objects.count() == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"external_id": ""}, "external_id"),
        ({"external_id": "   "}, "external_id"),
        ({"external_id": "x" * 201}, "external_id"),
        ({"external_id": 17}, "external_id"),
        ({"workflow": "no-such-workflow"}, "workflow"),
        ({"payload": ["not", "an", "object"]}, "payload"),
        ({"payload": "text"}, "payload"),
        ({"payload": {"blob": "x" * (64 * 1024)}}, "payload"),
        ({"high_priority": "yes"}, "high_priority"),
        ({"priority": 1001}, "priority"),
        ({"priority": -1001}, "priority"),
        ({"priority": "1"}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 1.5}, "priority"),
    ],
)
def test_submit_refuses_bad_input_and_writes_nothing(tenants: Tenants, kwargs: dict[str, Any], field: str) -> None:
    arguments: dict[str, Any] = {"workflow": "render", "external_id": "job-1", **kwargs}
    with pytest.raises(InvalidInput) as error:
        services.chart_submit(org=tenants.org_a, actor=ACTOR, **arguments)
    assert not isinstance(error.value, BulkInvalid)
    assert error.value.field == field
    assert error.value.status == 400
    assert not Chart.objects.exists()
    assert not ChartEvent.objects.exists()


def test_the_longest_external_id_and_payload_and_the_priority_bounds_are_accepted(tenants: Tenants) -> None:
    submit(tenants.org_a, "x" * 200, payload={"blob": "x" * (64 * 1024 - 20)}, priority=1000)
    submit(tenants.org_a, "low", priority=-1000)
    assert Chart.objects.count() == 2


def test_submit_to_an_unknown_org_is_not_found(tenants: Tenants) -> None:
    org = OrgFactory()
    Org.objects.filter(pk=org.pk).delete()
    with pytest.raises(NotFound) as error:
        submit(org, "job-1")
    assert error.value.field == "org"


def test_submitting_to_a_held_org_gives_a_queued_chart_that_is_held(tenants: Tenants) -> None:
    held = OrgFactory(weight=0)
    chart, created = submit(held, "job-1")
    assert created
    assert chart.state == ChartState.QUEUED
    assert Chart.objects.get(pk=chart.pk).org.is_held


# admission


def test_an_org_at_its_queue_limit_is_refused_with_a_retry_after(tenants: Tenants) -> None:
    org = OrgFactory(queue_limit=2)
    submit(org, "job-1")
    submit(org, "job-2")
    with pytest.raises(QueueFull) as error:
        submit(org, "job-3")
    assert (error.value.status, error.value.field, error.value.retry_after) == (429, "org", 60)
    assert "queue limit is 2" in error.value.message
    assert Chart.objects.filter(org=org).count() == 2
    # A repeat of an admitted submission is still answered: it adds nothing.
    chart, created = submit(org, "job-1")
    assert not created
    assert chart.external_id == "job-1"


def test_retry_after_is_the_next_predicted_start(tenants: Tenants) -> None:
    org = OrgFactory(queue_limit=1)
    chart, _ = submit(org, "job-1")
    ChartPlan.objects.create(chart=chart, predicted_start=timezone.now() + timedelta(seconds=120))
    with pytest.raises(QueueFull) as error:
        submit(org, "job-2")
    assert 110 <= error.value.retry_after <= 120
    ChartPlan.objects.filter(chart=chart).update(predicted_start=timezone.now() + timedelta(days=1))
    with pytest.raises(QueueFull) as error:
        submit(org, "job-2")
    assert error.value.retry_after == 3600


@pytest.mark.parametrize(
    ("state", "counts"),
    [
        (ChartState.QUEUED, True),
        (ChartState.PAUSED, True),
        (ChartState.RETRY_WAIT, True),
        (ChartState.DISPATCHING, False),
        (ChartState.RUNNING, False),
        (ChartState.SUCCEEDED, False),
        (ChartState.CANCELLED, False),
    ],
)
def test_only_waiting_charts_count_against_the_queue_limit(tenants: Tenants, state: str, counts: bool) -> None:
    org = OrgFactory(queue_limit=1)
    ChartFactory(org=org, workflow=tenants.workflow, state=state)
    if counts:
        with pytest.raises(QueueFull):
            submit(org, "job-1")
    else:
        assert submit(org, "job-1")[1]


# chart_submit_bulk


def test_bulk_submits_all_in_order_and_answers_repeats(tenants: Tenants) -> None:
    WorkflowFactory(name="simulate")
    existing, _ = submit(tenants.org_a, "job-2", workflow="simulate")
    items = [
        ChartRequest("render", "job-1"),
        ChartRequest("simulate", "job-2"),
        ChartRequest("render", "job-3", {"a": 1}),
    ]
    results = services.chart_submit_bulk(org=tenants.org_a, items=items, actor=ACTOR)
    assert [(c.external_id, created) for c, created in results] == [("job-1", True), ("job-2", False), ("job-3", True)]
    assert results[1][0].pk == existing.pk
    assert ChartEvent.objects.count() == 3


def test_bulk_reports_every_bad_item_by_index_and_writes_nothing(tenants: Tenants) -> None:
    WorkflowFactory(name="simulate")
    submit(tenants.org_a, "old", workflow="simulate")
    items = [
        ChartRequest("render", "ok-1"),
        ChartRequest("nope", "ok-2"),
        ChartRequest("render", ""),
        ChartRequest("render", "ok-1"),
        ChartRequest("render", "ok-4", priority=5000),
    ]
    with pytest.raises(BulkInvalid) as error:
        services.chart_submit_bulk(org=tenants.org_a, items=items, actor=ACTOR)
    assert error.value.errors == {
        1: {"workflow": ["unknown workflow 'nope'"]},
        2: {"external_id": ["external_id must be a non-empty string"]},
        3: {"external_id": ["repeats item 0 of this request"]},
        4: {"priority": ["priority must be between -1000 and 1000, got 5000"]},
    }
    assert error.value.as_dict()["items"]["3"] == {"external_id": ["repeats item 0 of this request"]}
    assert Chart.objects.count() == 1
    # A repeat that names another workflow is reported by index too.
    with pytest.raises(BulkInvalid) as error:
        services.chart_submit_bulk(
            org=tenants.org_a, items=[ChartRequest("render", "new"), ChartRequest("render", "old")], actor=ACTOR
        )
    assert error.value.errors == {1: {"external_id": ["already submitted with another workflow"]}}
    assert Chart.objects.count() == 1


def test_bulk_over_the_queue_limit_is_refused_whole(tenants: Tenants) -> None:
    org = OrgFactory(queue_limit=3)
    submit(org, "job-0")
    items = [ChartRequest("render", f"job-{i}") for i in range(4)]  # job-0 exists: 3 new ones, 1 + 3 > 3
    with pytest.raises(QueueFull):
        services.chart_submit_bulk(org=org, items=items, actor=ACTOR)
    assert Chart.objects.filter(org=org).count() == 1
    assert len(services.chart_submit_bulk(org=org, items=items[:3], actor=ACTOR)) == 3
    assert Chart.objects.filter(org=org).count() == 3


@pytest.fixture(params=["inline", "copy"])
def staging(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways `chart_submit_bulk` stages rows: a VALUES list (few rows), COPY (many)."""
    if request.param == "copy":
        monkeypatch.setattr(services, "INLINE_ROWS", 0)
    return str(request.param)


def test_bulk_writes_rows_as_the_model_would_and_one_event_each(tenants: Tenants, staging: str) -> None:
    tricky = {"text": 'tab\there\nnew line, back\\slash, quote " and \u00e9\u2603', "n": [1, 2.5, None, True]}
    items = [ChartRequest("render", f"copy-{i}", tricky if i == 3 else None, i == 1, i - 2) for i in range(5)]
    before = timezone.now()
    results = services.chart_submit_bulk(org=tenants.org_a, items=items, actor=ACTOR)
    model_made = ChartFactory.build(org=tenants.org_a, workflow=tenants.workflow)
    charts = {chart.external_id: chart for chart in Chart.objects.filter(org=tenants.org_a)}
    assert [chart.pk for chart, _ in results] == sorted(chart.pk for chart in charts.values())
    for index, (returned, created) in enumerate(results):
        stored = charts[f"copy-{index}"]
        assert created
        assert returned.pk == stored.pk
        assert returned.external_id == stored.external_id
        assert stored.payload == (tricky if index == 3 else {})
        assert (stored.high_priority, stored.priority) == (index == 1, index - 2)
        assert stored.state == ChartState.QUEUED
        assert returned.state == ChartState.QUEUED
        assert (stored.attempt, stored.runs, stored.last_error, stored.cost) == (
            model_made.attempt,
            model_made.runs,
            model_made.last_error,
            model_made.cost,
        )
        assert stored.available_at is None
        assert stored.claimed_at is None
        assert stored.temporal_workflow_id == ""
        assert before <= stored.created_at == stored.updated_at <= timezone.now()
    events = ChartEvent.objects.filter(chart__org=tenants.org_a)
    assert sorted(event.chart_id for event in events) == sorted(chart.pk for chart in charts.values())
    assert {(e.from_state, e.to_state, e.actor, e.reason) for e in events} == {("", "queued", ACTOR.name, "submitted")}


def test_bulk_twice_in_one_transaction_and_repeats_against_the_rows(tenants: Tenants, staging: str) -> None:
    with transaction.atomic():
        first = services.chart_submit_bulk(
            org=tenants.org_a, items=[ChartRequest("render", "t-1"), ChartRequest("render", "t-2")], actor=ACTOR
        )
        second = services.chart_submit_bulk(
            org=tenants.org_a, items=[ChartRequest("render", "t-2"), ChartRequest("render", "t-3")], actor=ACTOR
        )
    assert [(c.external_id, created) for c, created in second] == [("t-2", False), ("t-3", True)]
    assert second[0][0].pk == first[1][0].pk
    assert Chart.objects.filter(org=tenants.org_a).count() == 3
    assert ChartEvent.objects.filter(chart__org=tenants.org_a).count() == 3


def test_bulk_refuses_a_payload_that_is_not_json_naming_the_item(tenants: Tenants) -> None:
    items = [
        ChartRequest("render", "j-0"),
        ChartRequest("render", "j-1", {"x": float("nan")}),
        ChartRequest("render", "j-2", {"x": object()}),
    ]
    with pytest.raises(BulkInvalid) as error:
        services.chart_submit_bulk(org=tenants.org_a, items=items, actor=ACTOR)
    assert error.value.errors == {
        1: {"payload": ["payload numbers must be finite"]},
        2: {"payload": ["payload must hold JSON values only"]},
    }
    assert not Chart.objects.exists()
    assert not ChartEvent.objects.exists()


def test_bulk_limits_the_request_size(tenants: Tenants, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "MAX_BULK_ITEMS", 2)
    with pytest.raises(InvalidInput) as error:
        services.chart_submit_bulk(
            org=tenants.org_a, items=[ChartRequest("render", str(i)) for i in range(3)], actor=ACTOR
        )
    assert error.value.field == "items"
    assert services.chart_submit_bulk(org=tenants.org_a, items=[], actor=ACTOR) == []


def test_submission_is_announced_after_commit(
    tenants: Tenants, announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.chart_submit_bulk(
            org=tenants.org_a, items=[ChartRequest("render", "a"), ChartRequest("render", "b")], actor=ACTOR
        )
        assert announced.broadcasts == []
    assert len(callbacks) == 1
    message = {"kind": "charts", "org": tenants.org_a.pk, "submitted": 2}
    assert announced.broadcasts == [(STAFF_GROUP, message), (org_group(tenants.org_a.pk), message)]
    assert announced.replans == 1
    with django_capture_on_commit_callbacks() as callbacks:
        submit(tenants.org_a, "a")  # a repeat changes nothing and announces nothing
    assert callbacks == []


def test_a_refused_submission_announces_nothing(
    tenants: Tenants, announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    org = OrgFactory(queue_limit=1)
    submit(org, "job-1")
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(QueueFull):
        submit(org, "job-2")
    assert callbacks == []


# pause, resume, prioritize, move to top, cancel


@pytest.mark.parametrize("state", [ChartState.QUEUED, ChartState.RETRY_WAIT])
def test_pause_and_resume(tenants: Tenants, state: str) -> None:
    chart = chart_in(tenants, state, position=4)
    services.chart_pause(chart=chart, actor=ACTOR)
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.state, stored.position) == (ChartState.PAUSED, None)
    services.chart_resume(chart=chart, actor=ACTOR, reason="go on")
    assert Chart.objects.get(pk=chart.pk).state == ChartState.QUEUED
    events = list(ChartEvent.objects.values_list("from_state", "to_state", "actor", "reason"))
    assert events == [(state, "paused", ACTOR.name, "paused"), ("paused", "queued", ACTOR.name, "go on")]


@pytest.mark.parametrize("state", [ChartState.DISPATCHING, ChartState.RUNNING, ChartState.SUCCEEDED])
def test_only_waiting_charts_can_be_paused(tenants: Tenants, state: str) -> None:
    chart = chart_in(tenants, state)
    with pytest.raises(Conflict):
        services.chart_pause(chart=chart, actor=ACTOR)
    with pytest.raises(Conflict):
        services.chart_resume(chart=chart, actor=ACTOR)
    assert Chart.objects.get(pk=chart.pk).state == state
    assert not ChartEvent.objects.exists()


def test_pause_and_resume_are_announced_after_commit(
    tenants: Tenants, announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    chart = chart_in(tenants, ChartState.QUEUED)
    with django_capture_on_commit_callbacks(execute=True):
        services.chart_pause(chart=chart, actor=ACTOR)
        assert announced.replans == 0
    assert announced.replans == 1
    assert announced.broadcasts[0] == (STAFF_GROUP, {"kind": "chart", "org": tenants.org_a.pk, "chart": chart.pk})


@pytest.mark.parametrize("state", [ChartState.QUEUED, ChartState.PAUSED, ChartState.RETRY_WAIT])
def test_prioritize_a_waiting_chart(tenants: Tenants, state: str) -> None:
    chart = chart_in(tenants, state)
    services.chart_prioritize(chart=chart, high_priority=True, actor=ACTOR)
    services.chart_prioritize(chart=chart, priority=-7, actor=ACTOR)
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.high_priority, stored.priority, stored.state) == (True, -7, state)
    assert (chart.high_priority, chart.priority) == (True, -7)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({}, "high_priority"), ({"high_priority": 1}, "high_priority"), ({"priority": 1001}, "priority")],
)
def test_prioritize_refuses_bad_input(tenants: Tenants, kwargs: dict[str, Any], field: str) -> None:
    chart = chart_in(tenants, ChartState.QUEUED)
    with pytest.raises(InvalidInput) as error:
        services.chart_prioritize(chart=chart, actor=ACTOR, **kwargs)
    assert error.value.field == field
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.high_priority, stored.priority) == (False, 0)


@pytest.mark.parametrize("state", [ChartState.DISPATCHING, ChartState.RUNNING, ChartState.FAILED])
def test_a_chart_that_started_cannot_be_reprioritized(tenants: Tenants, state: str) -> None:
    chart = chart_in(tenants, state)
    with pytest.raises(Conflict):
        services.chart_prioritize(chart=chart, high_priority=True, actor=ACTOR)
    assert not Chart.objects.get(pk=chart.pk).high_priority


def test_move_to_top_outranks_every_waiting_chart_of_the_org_with_aging(tenants: Tenants) -> None:
    scheduler_config_set(actor=ACTOR, aging_cap=10)
    chart = chart_in(tenants, ChartState.QUEUED, priority=1)
    chart_in(tenants, ChartState.QUEUED, priority=3)
    chart_in(tenants, ChartState.RETRY_WAIT, priority=7)
    chart_in(tenants, ChartState.RUNNING, priority=500)  # started: not in the queue
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, priority=900)  # another org's queue
    services.chart_move_to_top(chart=chart, actor=ACTOR)
    assert Chart.objects.get(pk=chart.pk).priority == 7 + 10 + 1


def test_move_to_top_stays_within_the_priority_range_and_never_lowers(tenants: Tenants) -> None:
    chart = chart_in(tenants, ChartState.QUEUED, priority=0)
    chart_in(tenants, ChartState.QUEUED, priority=1000)
    services.chart_move_to_top(chart=chart, actor=ACTOR)
    assert Chart.objects.get(pk=chart.pk).priority == 1000
    alone = ChartFactory(org=tenants.org_b, workflow=tenants.workflow, priority=50)
    services.chart_move_to_top(chart=alone, actor=ACTOR)
    assert Chart.objects.get(pk=alone.pk).priority == 50


def test_move_to_top_of_a_running_chart_is_a_conflict(tenants: Tenants) -> None:
    with pytest.raises(Conflict):
        services.chart_move_to_top(chart=chart_in(tenants, ChartState.RUNNING), actor=ACTOR)


@pytest.mark.parametrize(
    "state",
    [ChartState.QUEUED, ChartState.PAUSED, ChartState.RETRY_WAIT, ChartState.DISPATCHING, ChartState.RUNNING],
)
def test_cancel_an_unfinished_chart(tenants: Tenants, state: str) -> None:
    chart = chart_in(tenants, state, position=3)
    cancelled = services.chart_cancel(chart=chart, actor=ACTOR, reason="customer asked")
    assert cancelled.state == ChartState.CANCELLED
    stored = Chart.objects.get(pk=chart.pk)
    assert (stored.state, stored.position) == (ChartState.CANCELLED, None)
    assert stored.finished_at is not None
    event = ChartEvent.objects.get()
    assert (event.from_state, event.to_state, event.reason) == (state, "cancelled", "customer asked")
    assert event.actor == ACTOR.name


@pytest.mark.parametrize("state", [ChartState.SUCCEEDED, ChartState.FAILED, ChartState.CANCELLED])
def test_a_finished_chart_cannot_be_cancelled(tenants: Tenants, state: str) -> None:
    chart = chart_in(tenants, state)
    with pytest.raises(Conflict) as error:
        services.chart_cancel(chart=chart, actor=ACTOR)
    assert error.value.field == "state"
    assert not ChartEvent.objects.exists()


def test_cancelling_a_running_chart_cancels_its_workflow_after_commit(
    tenants: Tenants, announced: Announcements, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    cancelled: list[str] = []
    monkeypatch.setattr(services, "_cancel_workflow", cancelled.append)
    chart = chart_in(tenants, ChartState.RUNNING, temporal_workflow_id="chart-1-1")
    queued = chart_in(tenants, ChartState.QUEUED)
    with django_capture_on_commit_callbacks(execute=True):
        services.chart_cancel(chart=chart, actor=ACTOR)
        services.chart_cancel(chart=queued, actor=ACTOR)
        assert cancelled == []
    assert cancelled == ["chart-1-1"]
    running = chart_in(tenants, ChartState.RUNNING, temporal_workflow_id="x")
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(CallerFailed):
        fail_after(lambda: services.chart_cancel(chart=running, actor=ACTOR))
    assert cancelled == ["chart-1-1"]


# concurrency: submissions that must see each other take the org's admission turn; others run at once


def _race(submitters: list[Any]) -> list[BaseException]:
    barrier = threading.Barrier(len(submitters))
    failures: list[BaseException] = []

    def run(submitter: Any) -> None:
        try:
            barrier.wait()
            submitter()
        except BaseException as error:  # collected and checked by the test
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(s,)) for s in submitters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_never_exceed_the_queue_limit(tenants: Tenants, announced: Announcements) -> None:
    org = OrgFactory(queue_limit=5)

    def submitter(name: str) -> Any:
        def submit_many() -> None:
            for i in range(5):
                with contextlib.suppress(QueueFull):
                    submit(org, f"{name}-{i}")

        return submit_many

    failures = _race([submitter("left"), submitter("right"), submitter("middle")])
    assert failures == []
    assert Chart.objects.filter(org=org).count() == 5
    assert ChartEvent.objects.filter(chart__org=org).count() == 5


@pytest.mark.django_db(transaction=True)
def test_concurrent_bulk_submissions_are_admitted_whole_or_not_at_all(
    tenants: Tenants, announced: Announcements
) -> None:
    org = OrgFactory(queue_limit=4)
    outcomes: list[str] = []

    def submitter(name: str) -> Any:
        def submit_bulk() -> None:
            items = [ChartRequest("render", f"{name}-{i}") for i in range(3)]
            try:
                services.chart_submit_bulk(org=org, items=items, actor=ACTOR)
                outcomes.append("admitted")
            except QueueFull:
                outcomes.append("refused")

        return submit_bulk

    assert _race([submitter("left"), submitter("right")]) == []
    assert sorted(outcomes) == ["admitted", "refused"]
    assert Chart.objects.filter(org=org).count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_same_submission_at_once_creates_one_chart(tenants: Tenants, announced: Announcements) -> None:
    results: list[tuple[int, bool]] = []

    def submitter() -> None:
        chart, created = submit(tenants.org_a, "job-1")
        results.append((chart.pk, created))

    assert _race([submitter, submitter, submitter]) == []
    assert Chart.objects.count() == 1
    assert sorted(created for _, created in results) == [False, False, True]
    assert len({pk for pk, _ in results}) == 1


class HeldOpen:
    """`action` run in a transaction of another thread, left open (its locks held) until `release`;
    then `then`, if given, in the same transaction before it commits."""

    def __init__(self, action: Any, then: Any = None) -> None:
        self.done, self._release = threading.Event(), threading.Event()
        self.failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(action, then))
        self._thread.start()
        assert self.done.wait(WAIT_SECONDS), "the held transaction did not get through its action"
        assert self.failures == []

    def _run(self, action: Any, then: Any) -> None:
        try:
            with transaction.atomic():
                action()
                self.done.set()
                assert self._release.wait(WAIT_SECONDS)
                if then is not None:
                    then()
        except BaseException as error:  # checked by the test
            self.failures.append(error)
            self.done.set()
        finally:
            connection.close()

    def release(self) -> None:
        self._release.set()
        self._thread.join(WAIT_SECONDS)
        assert not self._thread.is_alive()
        assert self.failures == []


class InThread:
    """`action` run (in autocommit) in a thread of its own; its result or error once joined."""

    def __init__(self, action: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(action,))
        self._thread.start()

    def _run(self, action: Any) -> None:
        try:
            self.result = action()
        except BaseException as error:  # checked by the test
            self.error = error
        finally:
            connection.close()

    def join(self) -> InThread:
        self._thread.join(WAIT_SECONDS)
        assert not self._thread.is_alive(), f"still waiting after {WAIT_SECONDS} s"
        return self


# A bound on every wait of these tests (a thread stuck on a lock fails the test instead of hanging it).
WAIT_SECONDS = 30.0


def wait_until_blocked_on_a_lock(statement: str) -> None:
    """Wait until a session of this database waits for a lock in a statement that contains `statement`."""
    deadline = timezone.now() + timedelta(seconds=WAIT_SECONDS)
    while timezone.now() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE %s",
                [f"%{statement}%"],
            )
            if cursor.fetchone()[0]:
                return
        threading.Event().wait(0.01)
    raise AssertionError(f"no session waited for a lock in {statement!r}")


@pytest.mark.django_db(transaction=True)
def test_a_single_submission_to_an_org_without_limit_waits_for_no_other(
    tenants: Tenants, announced: Announcements
) -> None:
    first = HeldOpen(lambda: submit(tenants.org_a, "first"))
    second = InThread(lambda: submit(tenants.org_a, "second")).join()  # while the first is uncommitted
    assert second.error is None
    first.release()
    assert sorted(Chart.objects.filter(org=tenants.org_a).values_list("external_id", flat=True)) == [
        "first",
        "second",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_submission_to_a_limited_org_waits_for_its_turn_and_counts_the_one_before(
    tenants: Tenants, announced: Announcements
) -> None:
    org = OrgFactory(queue_limit=1)
    first = HeldOpen(lambda: submit(org, "first"))
    second = InThread(lambda: submit(org, "second"))
    wait_until_blocked_on_a_lock("pg_advisory_xact_lock")
    first.release()
    assert isinstance(second.join().error, QueueFull)
    assert list(Chart.objects.filter(org=org).values_list("external_id", flat=True)) == ["first"]


@pytest.mark.django_db(transaction=True)
def test_a_queue_limit_set_waits_for_the_submissions_in_progress_of_the_org(
    tenants: Tenants, announced: Announcements
) -> None:
    from orgs.services import org_queue_limit_set

    first = HeldOpen(lambda: submit(tenants.org_a, "first"))  # admitted: no limit yet
    limit = InThread(lambda: org_queue_limit_set(org=tenants.org_a, queue_limit=1, actor=ACTOR))
    wait_until_blocked_on_a_lock("FOR UPDATE")
    first.release()
    assert limit.join().error is None
    with pytest.raises(QueueFull):  # the limit counts the submission it waited for
        submit(tenants.org_a, "second")


@pytest.mark.django_db(transaction=True)
def test_bulks_with_ids_in_common_take_turns_instead_of_deadlocking(tenants: Tenants, announced: Announcements) -> None:
    def bulk(*ids: str) -> Any:
        return lambda: services.chart_submit_bulk(
            org=tenants.org_a, items=[ChartRequest("render", i) for i in ids], actor=ACTOR
        )

    # Without turns: the first writes a, the second b and then waits for a, the first then waits for b.
    first = HeldOpen(bulk("a", "c"), then=bulk("b", "d"))
    second = InThread(bulk("b", "a"))
    wait_until_blocked_on_a_lock("")
    first.release()
    assert second.join().error is None
    assert [created for _, created in second.result] == [False, False]
    assert Chart.objects.filter(org=tenants.org_a).count() == 4


def test_prioritize_records_who_changed_what(tenants) -> None:  # type: ignore[no-untyped-def]
    from charts.models import ChartEvent
    from charts.services import chart_prioritize, chart_submit

    chart, _ = chart_submit(
        org=tenants.org_a, workflow="render", external_id="p1", actor=Actor("user:alice", staff=True)
    )
    chart_prioritize(chart=chart, high_priority=True, priority=5, actor=Actor("user:stella", staff=True))
    event = ChartEvent.objects.filter(chart=chart).latest("id")
    assert (event.from_state, event.to_state, event.actor) == ("queued", "queued", "user:stella")
    assert event.reason == "high_priority set to True, priority set to 5"


def nested(levels: int) -> Any:
    """`1` inside `levels` lists."""
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"note": "nul \x00 here"}, "payload must not contain NUL characters"),
        ({"nul\x00key": 1}, "payload must not contain NUL characters"),
        ({"note": "half \ud800 a pair"}, "payload must not contain lone surrogates (text must be valid Unicode)"),
        ({"x": [1, float("inf")]}, "payload numbers must be finite"),
        ({"deep": nested(32)}, "payload the JSON is nested too deeply (at most 32 levels)"),
    ],
)
def test_a_payload_from_the_shell_is_checked_as_strictly_as_a_parsed_body(
    tenants: Tenants, payload: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        submit(tenants.org_a, "shell-1", payload=payload)
    assert error.value.as_dict() == {"payload": [message]}
    assert not Chart.objects.exists()


@pytest.mark.parametrize(
    "payload",
    [
        {"emoji": "\U0001f600 beyond U+FFFF", "escaped": "a \\u0000 that is text"},
        {"brackets": "[" * 40 + "{" * 40},
        {"deep": nested(31)},  # 32 levels, the payload's own included
        {"wide": [[i] for i in range(50)]},
    ],
)
def test_payloads_that_look_suspect_in_their_text_but_are_fine_are_accepted(
    tenants: Tenants, payload: dict[str, Any]
) -> None:
    chart, created = submit(tenants.org_a, "fine-1", payload=payload)
    assert created
    chart.refresh_from_db()
    assert chart.payload == payload


@pytest.mark.parametrize(
    ("external_id", "found"),
    [("tab\there", "U+0009"), ("del\x7f", "U+007F"), ("zero\u200bwidth", "U+200B"), ("c1\x85", "U+0085")],
)
def test_an_external_id_with_a_hidden_character_is_refused_naming_it(
    tenants: Tenants, external_id: str, found: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        submit(tenants.org_a, external_id)
    assert error.value.as_dict() == {
        "external_id": [f"external_id must not contain control or invisible characters (found {found})"]
    }


def test_an_external_id_of_visible_characters_beyond_ascii_is_accepted(tenants: Tenants) -> None:
    _, created = submit(tenants.org_a, "r\u00e9sum\u00e9 \u2603 \U0001f600")
    assert created
    assert Chart.objects.get().external_id == "r\u00e9sum\u00e9 \u2603 \U0001f600"


def test_the_charts_returned_are_the_rows_written_as_the_orm_loads_them(
    tenants: Tenants, staging: str, django_assert_num_queries: Any
) -> None:
    items = [ChartRequest("render", f"w-{i}", {"i": i, "s": "\u00e9"}, i == 0, i) for i in range(3)]
    results = services.chart_submit_bulk(org=tenants.org_a, items=items, actor=ACTOR)
    loaded = {chart.pk: chart for chart in Chart.objects.filter(org=tenants.org_a)}
    for returned, created in results:
        stored = loaded[returned.pk]
        assert created
        for field in Chart._meta.concrete_fields:
            assert getattr(returned, field.attname) == getattr(stored, field.attname), field.attname
        with django_assert_num_queries(0):
            assert (returned.org, returned.workflow) == (tenants.org_a, tenants.workflow)
            assert all(getattr(returned, name) is None for name in PLAN_FIELDS)
        assert not returned._state.adding
        assert returned._state.db == "default"
    first = results[0][0]
    first.priority = 9
    first.save(update_fields=["priority"])
    assert Chart.objects.get(pk=first.pk).priority == 9
    assert Chart.objects.count() == 3


def test_a_bulk_refused_after_its_insert_takes_the_insert_back(tenants: Tenants, staging: str) -> None:
    """The org's unique index finds repeats as the rows are written; a conflict or a full queue found
    then refuses the whole bulk, and what was inserted is gone with its events."""
    WorkflowFactory(name="simulate")
    org = OrgFactory(queue_limit=4)
    submit(org, "old")
    before = ChartEvent.objects.count()
    conflicting = [ChartRequest("render", "new-0"), ChartRequest("simulate", "old"), ChartRequest("render", "new-1")]
    with pytest.raises(BulkInvalid) as error:
        services.chart_submit_bulk(org=org, items=conflicting, actor=ACTOR)
    assert error.value.errors == {1: {"external_id": ["already submitted with another workflow"]}}
    too_many = [ChartRequest("render", "old"), *(ChartRequest("render", f"new-{i}") for i in range(4))]
    with pytest.raises(QueueFull) as full:
        services.chart_submit_bulk(org=org, items=too_many, actor=ACTOR)
    assert full.value.message.startswith(f"org {org.slug} has 1 waiting charts; its queue limit is 4")
    assert list(Chart.objects.filter(org=org).values_list("external_id", flat=True)) == ["old"]
    assert ChartEvent.objects.count() == before
    results = services.chart_submit_bulk(org=org, items=too_many[:4], actor=ACTOR)
    assert [(chart.external_id, created) for chart, created in results] == [
        ("old", False),
        ("new-0", True),
        ("new-1", True),
        ("new-2", True),
    ]


PAYLOADS = [
    {},
    {"n": 5},
    {"text": "é ✓ 😀", "nested": {"list": [1, 2.5, -3e-7, None, True, False, "x"]}, "big": 2**62},
    {"quote": 'a "b" \\ c\n', "1": [], "": {}},
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payload_is_encoded_as_the_json_encoder_does(payload: dict[str, Any]) -> None:
    assert services._encode_payload(payload) == services._PAYLOAD_JSON.encode(payload)


@pytest.mark.parametrize(
    ("payload", "message"),
    [({"x": float("nan")}, "finite"), ({"x": float("inf")}, "finite"), ({"x": object()}, "JSON values")],
)
def test_a_payload_the_encoder_refuses_is_refused_naming_it(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as refused:
        services._payload_text(payload)
    assert refused.value.field == "payload"


def test_a_circular_payload_is_refused_naming_it() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(InvalidInput) as refused:
        services._payload_text(circular)
    assert refused.value.field == "payload"


# learned durations


def test_forgetting_learned_durations_logs_it_and_replans(
    tenants: Tenants, announced: Announcements, django_capture_on_commit_callbacks: Any
) -> None:
    """An account manager forgets what was learned of a pair (a new version of the workflow takes
    another time): its ETAs fall back to what else is known until new runs finish."""
    for org in (tenants.org_a, tenants.org_b):
        DurationStat.objects.create(org=org, workflow=tenants.workflow, count=2, total_seconds=40.0)
    forgotten = DurationStat.objects.filter(org=tenants.org_a)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.duration_stats_forget(stats=list(forgotten), actor=ACTOR) == 1
    assert list(DurationStat.objects.values_list("org__slug", flat=True)) == [tenants.org_b.slug]
    (change,) = OrgChange.objects.filter(org=tenants.org_a, field="learned durations")
    assert (change.actor, change.old_value, change.new_value) == (
        ACTOR.name,
        f"{tenants.workflow}: 20.0 s over 2 runs",
        "",
    )
    assert not OrgChange.objects.filter(org=tenants.org_b).exists()
    assert announced.replans == 1
