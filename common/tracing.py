"""OpenTelemetry tracing: on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, absent otherwise.

Every process that loads Django sets it up once (`setup`, from `FairschedConfig.ready`): the web
processes, the Celery worker before it forks its pool (the batch span processor restarts its thread
in each child), the `temporal_worker` command (which flushes before its `os._exit`). Without
the variable, `setup` returns at once and nothing of opentelemetry is imported: the helpers below
(`span`, `chart_span`, `remember_charts`, `temporal_interceptors`) then cost one global read.

With it, one trace follows a chart from its submit to its finish:

1. The Django instrumentation opens the request's span; `remember_charts` puts the org on it and
   keeps its context per submitted chart in the cache (the passes that come next serve many charts
   and are not the request's children).
2. The dispatcher's start of a chart (`chart_span`) is a child of the chart's submit, linked to the
   dispatch pass it ran in; the Temporal client's `TracingInterceptor` carries it into the workflow
   and its activities (the client's calls run on its own loop's thread, in a copy of the caller's
   context: `asyncio.run_coroutine_threadsafe`).
3. The completion hint is a Celery message sent inside the activity's span (the Celery
   instrumentation carries it), so the reconcile of the chart is in the same trace.

Replan, dispatch and reconcile passes are spans of their own (`span`), with their charts' ids; the
psycopg instrumentation adds a span per query under whichever is current.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACER_NAME = "fairsched"
CHART_CONTEXT_KEY = "tracing:chart:{chart_id}"
CHART_CONTEXT_SECONDS = 7 * 24 * 3600
"""How long a submitted chart's trace context is kept for its start (a week of waiting)."""

_provider: TracerProvider | None = None
_tracer: Tracer | None = None


def enabled() -> bool:
    """Whether this process traces (`setup` ran with an endpoint or an exporter)."""
    return _tracer is not None


def setup(*, service: str, exporter: SpanExporter | None = None) -> bool:
    """Trace this process, once; returns whether it traces.

    1. Without `exporter` and without `OTEL_EXPORTER_OTLP_ENDPOINT`: return False, importing nothing.
    2. Build a tracer provider named `service`, exporting in batches over OTLP/HTTP (the exporter
       reads the endpoint and its other `OTEL_EXPORTER_OTLP_*` variables), or at once to `exporter`
       (the tests' in-memory one). Only the OTLP one becomes the global provider: a test's provider
       is undone by `teardown`.
    3. Instrument Django (a middleware around every request), Celery (a span per task sent and run,
       its context in the message's headers) and psycopg (a span per query).
    """
    global _provider, _tracer
    if _tracer is not None:
        return True
    if exporter is None and not os.environ.get(ENDPOINT_VARIABLE):
        return False
    from opentelemetry import trace
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    DjangoInstrumentor().instrument(tracer_provider=provider)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    PsycopgInstrumentor().instrument(tracer_provider=provider, enable_commenter=False)
    _provider, _tracer = provider, provider.get_tracer(TRACER_NAME)
    return True


def teardown() -> None:
    """Undo `setup` (the tests': a process that traces does so until it ends)."""
    global _provider, _tracer
    if _provider is None:
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    DjangoInstrumentor().uninstrument()
    CeleryInstrumentor().uninstrument()
    PsycopgInstrumentor().uninstrument()
    _provider.shutdown()
    _provider = _tracer = None


def flush() -> None:
    """Export what is pending (a process about to end)."""
    if _provider is not None:
        _provider.force_flush()


def _attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {f"fairsched.{name}": value for name, value in attributes.items() if value is not None}


def span(name: str, **attributes: Any) -> Any:
    """A span `name` under the current one, with `attributes` (as `fairsched.<name>`); nothing when
    this process does not trace."""
    if _tracer is None:
        return nullcontext()
    return _tracer.start_as_current_span(name, attributes=_attributes(attributes))


def annotate(**attributes: Any) -> None:
    """Put `attributes` on the current span (the request's, in a view)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(_attributes(attributes))


def remember_charts(*, org_id: int, chart_ids: Iterable[int]) -> None:
    """Keep the current trace context for each submitted chart, so that its start continues the
    submit's trace, and put the org and the charts on the current span."""
    if _tracer is None:
        return
    from django.core.cache import cache
    from opentelemetry.propagate import inject

    ids = list(chart_ids)
    annotate(org_id=org_id, chart_ids=ids)
    carrier: dict[str, str] = {}
    inject(carrier)
    if carrier:
        cache.set_many({CHART_CONTEXT_KEY.format(chart_id=i): carrier for i in ids}, timeout=CHART_CONTEXT_SECONDS)


@contextmanager
def chart_span(name: str, *, chart_id: int, org_id: int) -> Iterator[None]:
    """A span `name` for one chart: a child of the chart's submit when its context was kept
    (`remember_charts`), linked to the current span (the pass serving it)."""
    if _tracer is None:
        yield
        return
    from django.core.cache import cache
    from opentelemetry import trace
    from opentelemetry.propagate import extract

    carrier = cache.get(CHART_CONTEXT_KEY.format(chart_id=chart_id))
    current = trace.get_current_span().get_span_context()
    links = [trace.Link(current)] if current.is_valid else []
    with _tracer.start_as_current_span(
        name,
        context=extract(carrier) if carrier else None,
        links=links,
        attributes=_attributes({"chart_id": chart_id, "org_id": org_id}),
    ):
        yield


def temporal_interceptors() -> list[Any]:
    """The Temporal client's interceptors: `TracingInterceptor` when tracing (the worker takes it
    from its client), none otherwise."""
    if _tracer is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(_tracer)]
