"""Tenant-aware Prometheus metrics on `/metrics`.

The passes run in Celery workers and the page is served by the web processes, so what the passes
observe (starts, finishes, skips, pass durations) is counted in Redis, shared by every process; what
describes the present (queued, running, cost in use, oldest eligible age) is read from the database
when Prometheus scrapes. Counting never fails a pass: a Redis blip loses a few increments, no more.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import cache

import redis
from django.conf import settings
from django.db.models import Count, F, Min, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from charts.models import CLAIMABLE_STATES, IN_FLIGHT_STATES, WAITING_STATES, Chart, ChartPlan, ChartState
from charts.promise import at_risk_q
from knobs.models import SchedulerConfig
from orgs.models import Org

logger = logging.getLogger(__name__)

PREFIX = "fairsched:metrics:"
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# An ETA's error as a share of the time that was left when it was made (`scheduling.core.accuracy`).
ERROR_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5)
# A succeeded chart's turnaround (finished - submitted): a minute to a week, around the promises sold
# (hours to a day or two).
TURNAROUND_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 604800)
# The charts a turnaround promise is judged on: those that ended by the system's doing. A chart that
# succeeded kept its promise if it finished by its due time; one that failed missed it, however early
# it ended (the result promised never came). A cancelled chart was withdrawn by its customer: no
# promise is left to keep, so it is not counted either way.
ATTAINMENT_STATES = (ChartState.SUCCEEDED, ChartState.FAILED)
# The windows over which each org's attainment of its turnaround promise is told.
ATTAINMENT_WINDOWS = (("1h", timedelta(hours=1)), ("1d", timedelta(days=1)))


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


def _bucket(value: float, buckets: tuple[float, ...]) -> str:
    for bound in buckets:
        if value <= bound:
            return str(bound)
    return "+Inf"


def _observe(name: str, label: str, value: float, buckets: tuple[float, ...]) -> None:
    key = f"{PREFIX}hist:{name}"
    pipe = _redis().pipeline(transaction=False)
    pipe.hincrby(key, f"{label}|{_bucket(value, buckets)}", 1)
    pipe.hincrbyfloat(key, f"{label}|sum", value)
    pipe.hincrby(key, f"{label}|count", 1)
    pipe.execute()


def _safely(action: str, fn: object) -> None:
    try:
        fn()  # type: ignore[operator]
    except redis.RedisError:
        logger.debug("metrics: could not record %s", action, exc_info=True)


def observe_start(*, org: str, waited: float, first: bool = True, cost: int = 1) -> None:
    """A chart started after waiting `waited` seconds since it was submitted, holding `cost` units (so
    that the org's cost per minute is a `rate()` of `fairsched_started_cost_units_total` away)."""

    def record() -> None:
        _redis().hincrby(f"{PREFIX}started_cost", org, cost)
        _observe("queue_age_at_start", org, waited, WAIT_BUCKETS)
        if first:
            _observe("time_to_first_start", org, waited, WAIT_BUCKETS)

    _safely("start", record)


def observe_finish(*, org: str, cost: int, retry: bool, turnaround: float | None = None) -> None:
    """A run finished successfully holding `cost` units; retries are counted apart for the retry share.
    `turnaround`: the chart's seconds from submission to this finish."""

    def record() -> None:
        pipe = _redis().pipeline(transaction=False)
        pipe.hincrby(f"{PREFIX}completed_cost", org, cost)
        pipe.hincrby(f"{PREFIX}finished_runs", f"{org}|{'retry' if retry else 'first'}", 1)
        pipe.execute()
        if turnaround is not None:
            _observe("turnaround", org, turnaround, TURNAROUND_BUCKETS)

    _safely("finish", record)


def observe_failure(*, org: str, kind: str, cost: int) -> None:
    """A run holding `cost` units did not succeed: `kind` is how it ended ("failed", "timed_out",
    "terminated", "lost")."""

    def record() -> None:
        pipe = _redis().pipeline(transaction=False)
        pipe.hincrby(f"{PREFIX}failed_runs", f"{org}|{kind}", 1)
        pipe.hincrby(f"{PREFIX}failed_cost", org, cost)
        pipe.execute()

    _safely("failure", record)


def observe_throttle(*, org: str, provider: str) -> None:
    """A run was throttled by its provider: not a failure, counted apart (`provider` may be "")."""

    def record() -> None:
        _redis().hincrby(f"{PREFIX}throttled_runs", f"{org}|{provider}", 1)

    _safely("throttle", record)


def observe_dispatch(*, latency: float, started: int, skips: dict[tuple[str, str], int]) -> None:
    """A dispatch pass: its latency, and the charts it passed over by (org slug, reason)."""

    def record() -> None:
        _observe("dispatch_latency", "all", latency, PASS_BUCKETS)
        if skips:
            pipe = _redis().pipeline(transaction=False)
            for (org, reason), count in skips.items():
                pipe.hincrby(f"{PREFIX}skips", f"{org}|{reason}", count)
            pipe.execute()

    _safely("dispatch", record)


def observe_eta_outcome(*, org: str, at: str, error: float, in_band: bool) -> None:
    """A finished chart's promise at `at` ("enqueue" or "start", `scheduling.accuracy`): its relative
    error, and whether the finish landed inside its p10-p90 band."""

    def record() -> None:
        _observe("eta_error_ratio", f"{org}|{at}", error, ERROR_BUCKETS)
        _redis().hincrby(f"{PREFIX}eta_in_band", f"{org}|{at}|{'true' if in_band else 'false'}", 1)

    _safely("eta outcome", record)


def observe_replan(seconds: float) -> None:
    _safely("replan", lambda: _observe("replan_duration", "all", seconds, PASS_BUCKETS))


def observe_reconcile(seconds: float) -> None:
    """A reconcile pass that got to its end (one Temporal could not answer is not counted: the
    count standing still is what says reconcile is stuck)."""
    _safely("reconcile", lambda: _observe("reconcile_duration", "all", seconds, PASS_BUCKETS))


def observe_webhook_attempt(*, org: str, ok: bool, disabled: bool = False) -> None:
    """One POST of a webhook delivery: answered 2xx (`ok`) or not; `disabled`: that failure disabled
    the endpoint. `org` is the endpoint's org slug, "" for an endpoint that hears every org."""

    def record() -> None:
        pipe = _redis().pipeline(transaction=False)
        pipe.hincrby(f"{PREFIX}webhook_attempts", f"{org}|{'ok' if ok else 'failed'}", 1)
        if disabled:
            pipe.hincrby(f"{PREFIX}webhook_disabled", org, 1)
        pipe.execute()

    _safely("webhook attempt", record)


def _hash(client: redis.Redis, key: str) -> dict[bytes, bytes]:
    return client.hgetall(key)  # type: ignore[return-value]  # a sync client: never an Awaitable


# The counters kept in Redis hashes: (metric name, help, hash, labels); a hash's keys are the label
# values joined by "|" (org slugs, kinds, reasons and provider slugs never hold one).
COUNTERS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("completed_cost_units", "Cost units of successfully finished runs", "completed_cost", ("org",)),
    ("finished_runs", "Successfully finished runs, first attempts and retries", "finished_runs", ("org", "kind")),
    (
        "failed_runs",
        "Runs that did not succeed, by how they ended (failed, timed_out, terminated, lost)",
        "failed_runs",
        ("org", "kind"),
    ),
    (
        "throttled_runs",
        "Runs their provider throttled: back in the queue, no attempt spent (not failures)",
        "throttled_runs",
        ("org", "provider"),
    ),
    ("dispatch_skips", "Charts the dispatcher passed over, by org and reason", "skips", ("org", "reason")),
    (
        "started_cost_units",
        "Cost units of the runs started (the org's cost per minute is a rate() away)",
        "started_cost",
        ("org",),
    ),
    ("failed_cost_units", "Cost units of the runs that did not succeed", "failed_cost", ("org",)),
    (
        "eta_in_band",
        "Finished charts whose finish landed inside (in_band=true) or outside the p10-p90 band of the ETA they"
        " were given at enqueue or at start",
        "eta_in_band",
        ("org", "at", "in_band"),
    ),
    (
        "webhook_attempts",
        'Webhook POSTs by the endpoint\'s org ("": every org) and outcome (ok: answered 2xx, failed)',
        "webhook_attempts",
        ("org", "outcome"),
    ),
    (
        "webhook_endpoints_disabled",
        "Webhook endpoints disabled after failing for FAIRSCHED_WEBHOOK_GIVE_UP seconds",
        "webhook_disabled",
        ("org",),
    ),
)


class FairschedCollector(Collector):
    """Reads the counters from Redis and the present state from PostgreSQL at scrape time."""

    def collect(self) -> Iterator[Metric]:
        yield from self._from_database()
        try:
            yield from self._from_redis()
        except redis.RedisError:
            logger.warning("metrics: Redis unavailable; pass counters omitted", exc_info=True)

    def _from_database(self) -> Iterator[Metric]:
        config = SchedulerConfig.load()
        now = timezone.now()
        # The charts at risk in the same grouped statement (`charts.promise`); the attainment reads the
        # last day's finished charts apart, down their index (`_attainment`).
        orgs = Org.objects.annotate(
            at_risk=Count("charts", filter=at_risk_q(now=now, prefix="charts__")),
            queued=Count("charts", filter=Q(charts__state__in=CLAIMABLE_STATES)),
            running=Count("charts", filter=Q(charts__state__in=IN_FLIGHT_STATES)),
            cost_in_use=Sum("charts__cost", filter=Q(charts__state__in=IN_FLIGHT_STATES)),
            oldest=Min(
                "charts__created_at",
                filter=Q(charts__state=ChartState.QUEUED, charts__plan__position__isnull=False),
            ),
        ).values("slug", "queued", "running", "cost_in_use", "oldest", "weight", "turnaround_share", "at_risk")
        queued = GaugeMetricFamily("fairsched_queued_charts", "Charts waiting (queued or retry_wait)", labels=["org"])
        running = GaugeMetricFamily("fairsched_running_charts", "Charts dispatching or running", labels=["org"])
        in_use = GaugeMetricFamily("fairsched_cost_units_in_use", "Budget units held by the org's runs", labels=["org"])
        oldest = GaugeMetricFamily(
            "fairsched_oldest_eligible_age_seconds", "Age of the org's oldest eligible chart", labels=["org"]
        )
        weight = GaugeMetricFamily("fairsched_org_weight", "The org's weight (0: held)", labels=["org"])
        at_risk = GaugeMetricFamily(
            "fairsched_charts_at_risk",
            "Waiting or running charts not yet past due whose chance of finishing after their due time is at"
            " least the at-risk threshold (last replan)",
            labels=["org"],
        )
        target = GaugeMetricFamily(
            "fairsched_turnaround_target_share",
            "The org's promised share of charts within its turnaround (orgs with one)",
            labels=["org"],
        )
        used_total = 0
        for row in orgs:
            slug, cost, oldest_at = row["slug"], row["cost_in_use"], row["oldest"]
            queued.add_metric([slug], row["queued"])
            running.add_metric([slug], row["running"])
            in_use.add_metric([slug], cost or 0)
            oldest.add_metric([slug], (now - oldest_at).total_seconds() if oldest_at else 0)
            weight.add_metric([slug], row["weight"])
            at_risk.add_metric([slug], row["at_risk"])
            if row["turnaround_share"] is not None:
                target.add_metric([slug], row["turnaround_share"])
            used_total += cost or 0
        yield from (queued, running, in_use, oldest, weight, at_risk, target, _attainment(now))
        yield GaugeMetricFamily("fairsched_budget_total", "Total budget in cost units", value=config.budget)
        yield GaugeMetricFamily("fairsched_budget_used", "Cost units in use", value=used_total)
        yield GaugeMetricFamily(
            "fairsched_replan_interval_seconds", "Configured seconds between replans", value=config.replan_interval
        )
        yield GaugeMetricFamily(
            "fairsched_reconcile_interval_seconds",
            "Configured seconds between reconciles",
            value=config.reconcile_interval,
        )
        waiting_total = Chart.objects.filter(state=ChartState.QUEUED).count()
        yield GaugeMetricFamily("fairsched_queue_depth", "Queued charts in all orgs", value=waiting_total)
        yield _waiting_reasons()

    def _from_redis(self) -> Iterator[Metric]:
        client = _redis()
        for name, doc, hash_name, labels in COUNTERS:
            family = CounterMetricFamily(f"fairsched_{name}", doc, labels=list(labels))
            for key, value in _hash(client, f"{PREFIX}{hash_name}").items():
                family.add_metric(key.decode().rsplit("|", len(labels) - 1), float(value))
            yield family
        for name, doc, buckets, label in (
            ("queue_age_at_start", "Seconds from submission to start", WAIT_BUCKETS, "org"),
            ("turnaround", "Seconds from submission to success of the org's charts", TURNAROUND_BUCKETS, "org"),
            ("time_to_first_start", "Seconds from submission to the first start", WAIT_BUCKETS, "org"),
            ("replan_duration", "Seconds per replan pass", PASS_BUCKETS, None),
            ("reconcile_duration", "Seconds per reconcile pass (passes that reached their end)", PASS_BUCKETS, None),
            ("dispatch_latency", "Seconds per dispatch pass", PASS_BUCKETS, None),
        ):
            yield _histogram(client, name, doc, buckets, label)
        yield _histogram(
            client,
            "eta_error_ratio",
            "|finish - ETA| / (finish - time of the prediction) of finished charts, by the ETA they were given"
            " at enqueue or at start",
            ERROR_BUCKETS,
            ("org", "at"),
            unit="",
        )


def _attainment(now: datetime) -> GaugeMetricFamily:
    """Per org and window, the share of its promises kept (`ATTAINMENT_STATES`): of the charts with a
    due time that succeeded or failed in the window, those that succeeded by it. One grouped statement
    over the longest window's finished charts (`chart_finished_at_idx`); no sample for an org without
    such a chart in the window."""
    family = GaugeMetricFamily(
        "fairsched_turnaround_attainment",
        "Share of the org's charts with a due time that ended in the window (succeeded or failed; cancelled"
        " ones are not counted) that succeeded by their due time; no sample without such a chart",
        labels=["org", "window"],
    )
    longest = max(length for _, length in ATTAINMENT_WINDOWS)
    kept = Q(state=ChartState.SUCCEEDED, finished_at__lte=F("due_at"))
    counts: dict[str, Count] = {}
    for name, length in ATTAINMENT_WINDOWS:
        counts[f"done_{name}"] = Count("id", filter=Q(finished_at__gt=now - length))
        counts[f"kept_{name}"] = Count("id", filter=Q(finished_at__gt=now - length) & kept)
    rows = (
        Chart.objects.filter(state__in=ATTAINMENT_STATES, finished_at__gt=now - longest, due_at__isnull=False)
        .values("org__slug")
        .annotate(**counts)
        .order_by("org__slug")
    )
    for row in rows:
        for name, _ in ATTAINMENT_WINDOWS:
            if row[f"done_{name}"]:
                family.add_metric([row["org__slug"], name], row[f"kept_{name}"] / row[f"done_{name}"])
    return family


def _waiting_reasons() -> GaugeMetricFamily:
    """Waiting charts per org and reason, as the last replan left them (`charts.models.WaitingReason`;
    `starting`: the replan starts it now)."""
    family = GaugeMetricFamily(
        "fairsched_waiting_charts", "Waiting charts by org and why they wait (last replan)", labels=["org", "reason"]
    )
    counts = (
        ChartPlan.objects.filter(chart__state__in=WAITING_STATES)
        .values_list("chart__org__slug", "waiting_reason")
        .annotate(count=Count("chart_id"))
        .order_by("chart__org__slug", "waiting_reason")
    )
    for org, reason, count in counts:
        family.add_metric([org, reason or "starting"], count)
    return family


def _histogram(
    client: redis.Redis,
    name: str,
    doc: str,
    buckets: tuple[float, ...],
    label: str | tuple[str, ...] | None,
    *,
    unit: str = "_seconds",
) -> HistogramMetricFamily:
    """A histogram from its Redis hash; several labels are one key, their values joined by "|"."""
    labels = [label] if isinstance(label, str) else list(label or ())
    family = HistogramMetricFamily(f"fairsched_{name}{unit}", doc, labels=labels)
    raw = _hash(client, f"{PREFIX}hist:{name}")
    by_label: dict[str, dict[str, float]] = {}
    for key, value in raw.items():
        series, field = key.decode().rsplit("|", 1)
        by_label.setdefault(series, {})[field] = float(value)
    for series, fields in sorted(by_label.items()):
        cumulative = 0.0
        points = []
        for bound in (*buckets, "+Inf"):
            cumulative += fields.get(str(bound), 0.0)
            points.append((str(bound), cumulative))
        family.add_metric(series.split("|", len(labels) - 1) if labels else [], points, fields.get("sum", 0.0))
    return family


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition: for staff sessions, or for a scraper with `Authorization: Bearer
    <METRICS_TOKEN>` when that setting is set. Org slugs are tenant data, so the page is never public."""
    token = settings.METRICS_TOKEN
    bearer = request.headers.get("Authorization", "")
    allowed = bool(token) and hmac.compare_digest(bearer, f"Bearer {token}")
    if not allowed and not (request.user.is_authenticated and request.user.is_staff):
        return HttpResponse(
            "metrics need a staff session or the metrics token\n", status=403, content_type="text/plain"
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FairschedCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
