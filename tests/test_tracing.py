"""Tracing (`common.tracing`): nothing of OpenTelemetry without its endpoint, and with it one trace
from a chart's submit to its finish across the web request, a real Celery worker (its spans sent over
OTLP/HTTP to a collector in this test), a real Temporal dev server and worker, and the reconcile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.test import APIClient

from charts.models import Chart, ChartState
from common import tracing
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.access import api_token_issue
from scheduling.temporal.client import reset_client
from scheduling.temporal.worker import enqueue_reconcile_hint
from tests.celery_workers import celery_workers
from tests.conftest import Tenants
from tests.temporal_server import WorkerThread

ROOT = Path(__file__).resolve().parents[1]
ACTOR = Actor("user:test", staff=True)


def test_without_the_endpoint_nothing_of_opentelemetry_is_imported() -> None:
    """A process that loads Django, the Celery app, the tasks and the Temporal worker without
    `OTEL_EXPORTER_OTLP_ENDPOINT` does not trace and has not imported opentelemetry."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    script = (
        "import django, sys; django.setup(); import fairsched.celery, scheduling.tasks, scheduling.temporal.worker;"
        "from common import tracing; from scheduling.temporal.connection import TemporalSettings, connect_arguments;"
        "print(tracing.enabled(), 'interceptors' in connect_arguments(TemporalSettings()),"
        " sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[-2] == "False False []"


@dataclass(frozen=True)
class Span:
    trace_id: str
    name: str
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver on a free port: the spans it was sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans.extend(
                            Span(
                                span.trace_id.hex(),
                                span.name,
                                {kv.key: _value(kv.value) for kv in span.attributes},
                            )
                            for span in scope.spans
                        )
                body = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def traced(temporal_settings: Any) -> Iterator[InMemorySpanExporter]:
    """This process traces into memory (the Temporal client connected again, with the interceptor)."""
    exporter = InMemorySpanExporter()
    tracing.setup(service="fairsched-test", exporter=exporter)
    reset_client()
    try:
        yield exporter
    finally:
        tracing.teardown()
        reset_client()


class HintingWorker(WorkerThread):
    """The demo worker, hinting the completion to Celery as the real worker does."""

    def _record_hint(self, chart_id: int, outcome: str) -> None:
        super()._record_hint(chart_id, outcome)
        enqueue_reconcile_hint(chart_id, outcome)


@pytest.fixture
def hinting_worker(traced: InMemorySpanExporter) -> Iterator[str]:
    worker = HintingWorker(f"fairsched-trace-{os.getpid()}-{time.monotonic_ns()}", [])
    worker.start()
    try:
        yield worker.task_queue
    finally:
        worker.stop()


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: Callable[[], object]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not reached within {timeout} s: {what()}")


# The end-to-end test instruments this process's Django, Celery and psycopg: it runs in a pytest of its
# own (`test_one_trace_in_a_process_of_its_own`), so that nothing before it (a request handler built
# without the instrumented middleware) or after it (instrumented libraries) shares its process.
ALONE = "FAIRSCHED_TRACING_ALONE"


@pytest.mark.temporal
@pytest.mark.slow
def test_one_trace_in_a_process_of_its_own() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         f"{__file__}::test_one_trace_from_a_submit_to_its_finish"],
        env={**os.environ, ALONE: "1"}, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout


@pytest.mark.temporal
@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(ALONE), reason="runs in a process of its own (see above)")
@pytest.mark.django_db(transaction=True)
def test_one_trace_from_a_submit_to_its_finish(
    tenants: Tenants,
    traced: InMemorySpanExporter,
    hinting_worker: str,
    collector: Collector,
    temporal_settings: Any,
    tmp_path: Path,
) -> None:
    scheduler_config_set(actor=ACTOR, budget=2, replan_interval=3600, reconcile_interval=3600)
    tenants.workflow.task_queue = hinting_worker
    tenants.workflow.params = {"duration": 0.2}
    tenants.workflow.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.member_a, org=tenants.org_a)}")  # type: ignore[arg-type]
    with celery_workers(
        tmp_path,
        TEMPORAL_ADDRESS=temporal_settings.TEMPORAL_ADDRESS,
        CACHE_PREFIX=settings.CACHES["default"]["KEY_PREFIX"],  # the submit's kept trace contexts
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",
    ) as start:
        start()
        response = client.post("/api/v1/charts/", {"workflow": "render", "external_id": "traced"}, format="json")
        assert response.status_code == 201, response.content
        chart_id = response.json()["id"]

        def spans() -> list[Span]:
            local = [
                Span(format(s.context.trace_id, "032x"), s.name, dict(s.attributes or {}))
                for s in traced.get_finished_spans()
            ]
            return local + list(collector.spans)

        def trace_names() -> set[str]:
            (submit,) = [s for s in spans() if s.attributes.get("fairsched.chart_ids") == (chart_id,)]
            return {s.name for s in spans() if s.trace_id == submit.trace_id}

        wait_for(lambda: Chart.objects.get(pk=chart_id).state == ChartState.SUCCEEDED, 60, lambda: trace_names())
        wait_for(lambda: "reconcile.chart" in trace_names(), 10, trace_names)

    everything = spans()
    (submit,) = [s for s in everything if s.attributes.get("fairsched.chart_ids") == (chart_id,)]
    assert submit.name.startswith("POST")
    assert submit.attributes["fairsched.org_id"] == tenants.org_a.pk
    one_trace = [s for s in everything if s.trace_id == submit.trace_id]
    names = {s.name for s in one_trace}
    assert {
        "chart.start",
        "StartWorkflow:fairsched.demo",
        "RunWorkflow:fairsched.demo",
        "RunActivity:demo_work",
        "RunActivity:completion_hint",
        "run/scheduling.tasks.reconcile_chart",
        "reconcile.chart",
    } <= names, json.dumps(sorted(names))
    for name in ("chart.start", "reconcile.chart"):
        (span,) = [s for s in one_trace if s.name == name]
        assert span.attributes["fairsched.chart_id"] == chart_id
        assert span.attributes["fairsched.org_id"] == tenants.org_a.pk
    assert any(s.name == "dispatch" for s in collector.spans)
    assert any(s.name == "replan" for s in collector.spans)
