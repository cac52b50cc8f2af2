"""The integrators' example (`examples/worker.py`): a plain temporalio worker, started as its own process
against the real Temporal dev server, its workflow registered in the admin and its charts submitted
through the API and driven by fairsched's real passes. The README shows the same code."""

from __future__ import annotations

import ast
import contextlib
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient
from temporalio.client import Client

from charts.models import Chart, ChartState
from common.actors import RECONCILER
from fairsched.devservices import REPO_ROOT
from orgs.access import api_token_issue
from orgs.models import Membership, Org, ProviderPause, Workflow
from scheduling.dispatch import dispatch_run
from scheduling.reconcile import reconcile_run
from scheduling.replan import plan_refresh
from scheduling.temporal.client import describe_workflow, temporal_call
from tests.admin_helpers import change_form_data
from tests.factories import MembershipFactory, OrgFactory, ProviderFactory, UserFactory
from tests.processes import end, start

EXAMPLE = REPO_ROOT / "examples" / "worker.py"
WORKFLOW_TYPE = "example.render"
WORKER_START_SECONDS = 60.0


def test_the_readme_shows_the_example_as_it_is() -> None:
    source = EXAMPLE.read_text()
    readme = (REPO_ROOT / "README.md").read_text()

    assert f"```python\n{source}```\n" in readme


def test_the_example_imports_only_the_standard_library_and_temporalio() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    roots = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}

    assert roots - set(sys.stdlib_module_names) == {"temporalio"}


@pytest.fixture(autouse=True)
def _passes_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test drives the passes itself; a lever's after-commit replan request goes nowhere."""
    monkeypatch.setattr("common.events.request_replan", lambda: None)


@contextlib.contextmanager
def running_example(address: str, task_queue: str, cwd: Path) -> Iterator[subprocess.Popen[str]]:
    """`python -I examples/worker.py` polling `task_queue`, from when it polls; stopped with SIGTERM
    after (unless the test killed it), which it must answer by exiting 0."""
    worker = start(
        [sys.executable, "-I", str(EXAMPLE), "--address", address, "--task-queue", task_queue],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        first = worker.stdout.readline()  # blocks until the worker polls, or exits
        assert first.strip() == f"polling {task_queue}", first + worker.stdout.read()
        yield worker
    finally:
        stopped_here = worker.poll() is None  # not killed by the test
        if stopped_here:
            worker.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(WORKER_START_SECONDS)
        status = end(worker)
        if stopped_here:
            assert status == 0


@pytest.fixture
def example_worker(temporal_settings: Any, tmp_path: Path) -> Iterator[str]:
    """The example worker polling a fresh task queue; yields the queue's name."""
    task_queue = f"example-{uuid.uuid4().hex[:12]}"
    with running_example(temporal_settings.TEMPORAL_ADDRESS, task_queue, tmp_path):
        yield task_queue


@pytest.fixture
def staff_client() -> APIClient:
    client = APIClient()
    client.force_login(UserFactory(username="stella", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def register(staff_client: APIClient, example_worker: str) -> Callable[..., Workflow]:
    """Register the example's workflow in the admin, as the README says."""

    def add(name: str, *, provider: str = "", params: str = '{"seconds": 0.2}', task_queue: str = "") -> Workflow:
        url = reverse("admin:orgs_workflow_add")
        data = change_form_data(staff_client.get(url))
        provider_id = ProviderFactory(slug=provider).pk if provider else ""
        data.update(
            name=name, workflow_type=WORKFLOW_TYPE, task_queue=task_queue or example_worker, default_cost=1,
            params=params,
            provider=provider_id,
        )  # fmt: skip
        response = staff_client.post(url, data)
        assert response.status_code == 302, response.content.decode()[:2000]
        return Workflow.objects.get(name=name)

    return add


@pytest.fixture
def acme() -> tuple[Org, APIClient]:
    """An org and an API client with a token of one of its members."""
    org = OrgFactory(slug="acme")
    user: User = UserFactory(username="alice")
    MembershipFactory(user=user, org=org, role=Membership.Role.MEMBER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=user, org=org)}")
    return org, client


def submit(client: APIClient, workflow: Workflow, external_id: str, payload: dict[str, Any]) -> Chart:
    response = client.post(
        "/api/v1/charts/", {"workflow": workflow.name, "external_id": external_id, "payload": payload}, format="json"
    )
    assert response.status_code == 201, response.json()
    return Chart.objects.get(pk=response.json()["id"])


def fresh(chart: Chart) -> Chart:
    return Chart.objects.get(pk=chart.pk)


def drive_until(done: Callable[[], bool], *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reconcile_run()
        plan_refresh()
        dispatch_run()
        if done():
            return
        time.sleep(0.2)
    raise AssertionError("the passes did not get there in time")


def workflow_result(workflow_id: str) -> Any:
    async def result(client: Client) -> Any:
        return await client.get_workflow_handle(workflow_id).result()

    return temporal_call(result)


@pytest.mark.temporal
@pytest.mark.django_db(transaction=True)
def test_a_chart_of_the_example_succeeds(register: Callable[..., Workflow], acme: tuple[Org, APIClient]) -> None:
    workflow = register("render")
    chart = submit(acme[1], workflow, "report-1", {"file": "q3.pdf"})

    drive_until(lambda: fresh(chart).state == ChartState.SUCCEEDED)

    done = fresh(chart)
    assert (done.attempt, done.runs, done.last_error) == (1, 1, "")
    assert workflow_result(done.temporal_workflow_id) == {"rendered": "q3.pdf"}  # the chart's payload got there


@pytest.mark.temporal
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("loss", ["stopped", "killed"])
def test_a_chart_outlives_the_loss_of_its_example_worker(
    register: Callable[..., Workflow], acme: tuple[Org, APIClient], temporal_settings: Any, tmp_path: Path, loss: str
) -> None:
    """A deploy stops the worker running a chart (SIGTERM: its activity is cancelled); a crash kills
    it (SIGKILL: its heartbeats stop, and the heartbeat timeout notices). Either way another worker
    of the queue takes the render over, and the chart succeeds on its first attempt and first run."""
    task_queue = f"example-{uuid.uuid4().hex[:12]}"
    workflow = register(f"render-{loss}", params='{"seconds": 2}', task_queue=task_queue)
    chart = submit(acme[1], workflow, f"report-{loss}", {})
    with running_example(temporal_settings.TEMPORAL_ADDRESS, task_queue, tmp_path) as first:
        drive_until(lambda: fresh(chart).state == ChartState.RUNNING)
        time.sleep(1.0)  # the render is under way
        if loss == "killed":
            first.kill()
            first.wait(WORKER_START_SECONDS)
    with running_example(temporal_settings.TEMPORAL_ADDRESS, task_queue, tmp_path):
        drive_until(lambda: fresh(chart).state == ChartState.SUCCEEDED)
    done = fresh(chart)
    assert (done.attempt, done.runs, done.last_error) == (1, 1, "")


@pytest.mark.temporal
@pytest.mark.django_db(transaction=True)
def test_a_completion_without_a_hint_is_found_by_the_reconcile_pass(
    register: Callable[..., Workflow], acme: tuple[Org, APIClient]
) -> None:
    chart = submit(acme[1], register("render"), "report-2", {"seconds": 0.1})
    drive_until(lambda: fresh(chart).state == ChartState.RUNNING)
    workflow_id = fresh(chart).temporal_workflow_id

    deadline = time.monotonic() + 30
    while (outcome := describe_workflow(workflow_id)) is None or outcome.status == "running":
        assert time.monotonic() < deadline, "the example's run did not close"
        time.sleep(0.1)
    assert outcome.status == "completed"
    assert fresh(chart).state == ChartState.RUNNING  # nothing told fairsched

    reconcile_run()

    done = fresh(chart)
    assert done.state == ChartState.SUCCEEDED
    last = done.events.last()
    assert last is not None
    assert last.actor == RECONCILER.name


@pytest.mark.temporal
@pytest.mark.django_db(transaction=True)
def test_a_throttle_requeues_the_chart_without_spending_an_attempt(
    register: Callable[..., Workflow], acme: tuple[Org, APIClient]
) -> None:
    org, client = acme
    workflow = register("render-limited", provider="render-api")
    chart = submit(client, workflow, "report-3", {"throttle": 300})

    drive_until(lambda: fresh(chart).runs == 1 and fresh(chart).state == ChartState.QUEUED)

    back = fresh(chart)
    assert (back.attempt, back.runs, back.last_error) == (0, 1, "")
    assert back.events.last().reason.startswith("throttled by render-api: back in the queue")  # type: ignore[union-attr]
    pause = ProviderPause.objects.get(provider__slug="render-api", org=org)
    assert pause.until > timezone.now() + timedelta(seconds=250)
    assert back.available_at is not None
    assert back.available_at >= pause.until - timedelta(seconds=1)

    drive_until(lambda: True)  # another cycle: the pause holds it
    assert (fresh(chart).state, fresh(chart).runs) == (ChartState.QUEUED, 1)
    provider = client.get("/api/v1/providers/render-api/").json()
    assert [p["org"] for p in provider["pauses"]] == ["acme"]
