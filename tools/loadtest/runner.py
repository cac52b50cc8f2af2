"""`python -m tools.loadtest.runner`: run the hostile workload on the real stack, break things
during the run, and write the event log (`events.json`) that `metrics` and `report` read.

Steps:
1. Start private services under a scratch folder: PostgreSQL (pgserver, a Unix socket, so it can be
   stopped), `redis-server` on a free port, and a Temporal dev server with `--db-filename` (so a
   restart keeps its state). Nothing shared on the machine is touched, let alone stopped.
2. Point Django at them, migrate, create the orgs (with their turnaround targets), workflows,
   provider and the scheduler settings; hold the held org.
3. Start N demo Temporal workers and a Celery worker with embedded beat as child processes. From here
   on nobody but beat drives the passes.
4. Every quarter second: submit the charts that are due (`chart_submit_bulk`, one call per org; each
   with its own `due_at`, its submission + `PlannedChart.due_in`), run
   the scheduled levers (release the held org, pause the provider), inject the faults that are due,
   and once a second sample every waiting chart's ETA and band (the first value seen is "at enqueue",
   the last one before its first dispatch is "at start").
5. After the last submission, wait for every chart to reach a terminal state (bounded).
6. Read the whole record: charts, their transitions, and Temporal's own description of every
   workflow run of every attempt (and any chart workflow Temporal has that the database does not).
7. Stop everything, write `events.json` (times in seconds from the first submission).

Several of every process (the multi-instance run, `tools.loadtest.multirun`): `--celery-workers`
workers each with its own beat, `--temporal-workers` Temporal workers, `--web` web processes (the
Procfile's command); `--leader-kills N` kills -9, N times spread over the window, whichever Celery
process holds the dispatcher's lock mid-pass, and times how long until another process holds it
(the failover). With web processes, after the drain the chart status read is loaded back to back by
50 callers through one web process, then through all of them (`api_load`).

Faults (`--faults`, comma-separated, each at its own moment of the window): `kill_worker` (SIGKILL to
the Celery worker's process group while a chart is being dispatched, restarted 2 s later),
`temporal` (stop and restart the Temporal server on its port and database file), `redis` (stop
and restart redis-server on its port), `postgres` (stop PostgreSQL for `--pg-outage` seconds). A
child that dies on its own is restarted and recorded as an unplanned fault.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from common.actors import Actor
from fairsched.devservices import (
    REPO_ROOT,
    ChildProcess,
    EmbeddedPostgres,
    EmbeddedService,
    free_port,
    port_accepts,
    start_postgres,
    start_redis,
    start_temporal,
    wait_until,
)
from fairsched.launcher import procfile_commands
from tools.loadtest.api_load import status_throughput
from tools.loadtest.webhooks import RecordingReceiver, feed_and_log
from tools.loadtest.workload import TASK_QUEUE, Workload, build

T = TypeVar("T")

ACTOR = Actor(name="loadtest", staff=True)
# ETAs over the wait and org clear-times are kept every this many samples (one a second).
WAIT_SAMPLE_EVERY = 5
DATABASE = "loadtest"
FAULT_AT = {"kill_worker": 0.2, "temporal": 0.35, "redis": 0.55, "postgres": 0.7}
ALL_FAULTS = tuple(FAULT_AT)
TICK_SECONDS = 0.25
SAMPLE_SECONDS = 1.0
WORKER_RESTART_DELAY = 2.0
KILL_WINDOW_SECONDS = 10.0
FAILOVER_TIMEOUT_SECONDS = 60.0
LOCK_POLL_SECONDS = 0.002
API_CLIENTS = 50
WEBHOOK_SETTLE_SECONDS = 60.0
API_PER_CLIENT = 40
# The dispatcher's advisory lock as pg_locks shows a bigint key: high half in classid, low in objid.
LEADER_QUERY = """
    SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s AND l.objsubid = 1 AND l.granted
"""
SCHEDULER_SETTINGS: dict[str, Any] = {
    "replan_interval": 1.0,
    "reconcile_interval": 1.0,
    "dispatch_stale_after": 5.0,
    "max_attempts": 3,
    "backoff_base": 2.0,
    "backoff_ceiling": 8.0,
    "arrival_window": 60.0,
}


@dataclass
class Fault:
    """One injected (or unplanned) disruption: when it began, when the service was back."""

    kind: str
    at: float
    restored: float | None = None
    detail: str = ""


@dataclass
class EtaSample:
    at: float
    eta: float
    low: float | None
    high: float | None
    start: float | None = None  # a waiting chart's predicted start: the ETA's wait and duration apart


@dataclass
class Services:
    """The private services of one run and how to restart them."""

    data_dir: Path
    pg: EmbeddedPostgres | None = None
    redis: EmbeddedService | None = None
    redis_port: int = 0
    temporal: EmbeddedService | None = None
    temporal_port: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        self.pg = start_postgres(self.data_dir, database=DATABASE)
        self.redis_port = free_port()
        self.redis = start_redis(self.data_dir, port=self.redis_port)
        self.temporal_port = free_port()
        self.temporal = self._start_temporal()
        self.env = {
            "DATABASE_URL": self.pg.value,
            "REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/1",
            "TEMPORAL_ADDRESS": self.temporal.value,
            "TEMPORAL_NAMESPACE": "default",
            "CACHE_PREFIX": "loadtest",
            "CHANNELS_PREFIX": "loadtest",
            # The run's own webhook receiver is plain HTTP on 127.0.0.1 (tools/loadtest/webhooks.py).
            "FAIRSCHED_WEBHOOK_ALLOW_HTTP": "1",
            "FAIRSCHED_WEBHOOK_ALLOW_PRIVATE": "1",
        }

    def _start_temporal(self) -> EmbeddedService:
        wait_until(lambda: not port_accepts(self.temporal_port), what="Temporal port", timeout=30)
        return start_temporal(
            port=self.temporal_port, db_file=self.data_dir / "temporal.db", log_dir=self.data_dir / "logs"
        )

    def restart_temporal(self) -> None:
        assert self.temporal is not None
        self.temporal.stop()
        self.temporal = self._start_temporal()

    def restart_redis(self) -> None:
        assert self.redis is not None
        self.redis.stop()
        wait_until(lambda: not port_accepts(self.redis_port), what="Redis port", timeout=30)
        self.redis = start_redis(self.data_dir, port=self.redis_port)

    def stop_postgres(self) -> None:
        assert self.pg is not None
        self.pg.halt()

    def start_postgres(self) -> None:
        assert self.pg is not None
        self.pg.resume()

    def stop(self) -> None:
        for stop in (
            lambda: self.temporal and self.temporal.stop(),
            lambda: self.redis and self.redis.stop(),
            lambda: self.pg and self.pg.stop(),
        ):
            with contextlib.suppress(Exception):
                stop()


class Children:
    """The Celery workers (each with beat), the demo Temporal workers and the web processes, restartable."""

    def __init__(
        self, env: dict[str, str], log_dir: Path, temporal_workers: int, celery_workers: int = 1, web: int = 0
    ) -> None:
        self.env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.log_dir = log_dir
        self.celery: list[ChildProcess] = []
        self.workers: list[ChildProcess] = []
        self.web: list[ChildProcess] = []
        self.web_ports: list[int] = []
        self.temporal_workers = temporal_workers
        self.celery_workers = celery_workers
        self.web_processes = web
        self.starts: dict[str, int] = defaultdict(int)

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> ChildProcess:
        self.starts[name] += 1
        with open(self.log_dir / f"{name}-{self.starts[name]}.log", "ab") as log:
            return ChildProcess.spawn(name, args, env=env or self.env, output=log)

    def _celery_name(self, index: int) -> str:
        return "celery" if self.celery_workers == 1 else f"celery-{index}"

    def _start_one_celery(self, index: int) -> ChildProcess:
        name = self._celery_name(index)
        schedule = self.log_dir / f"beat-schedule-{name}-{self.starts[name] + 1}"
        return self._spawn(
            name,
            [sys.executable, "-m", "celery", "-A", "fairsched", "worker", "-B", "--concurrency", "2",
             "--loglevel", "INFO", "--schedule", str(schedule), "-Q", "celery", "--without-gossip",
             "--without-mingle", "-n", f"{name}@%h"],
        )  # fmt: skip

    def start_celery(self) -> None:
        """Start every Celery worker that is not running."""
        for index in range(self.celery_workers):
            if index == len(self.celery):
                self.celery.append(self._start_one_celery(index))
            elif not self.celery[index].alive():
                self.celery[index] = self._start_one_celery(index)

    def kill_celery(self) -> None:
        """SIGKILL the first Celery worker's whole process group (its beat and pool too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.celery[0].process.pid, signal.SIGKILL)
        self.celery[0].process.wait(10)

    def start_workers(self) -> None:
        self.workers = [self._start_worker(index) for index in range(self.temporal_workers)]

    def _start_worker(self, index: int) -> ChildProcess:
        return self._spawn(
            f"temporal-worker-{index}", [sys.executable, "manage.py", "temporal_worker", "--task-queue", TASK_QUEUE]
        )

    def start_web(self) -> None:
        """Start the web processes (the Procfile's command, one uvicorn worker each) and wait for them."""
        command = procfile_commands()["web"]
        bin_dir = str(Path(sys.executable).parent)
        for index in range(self.web_processes):
            port = free_port()
            env = {
                **self.env,
                "PORT": str(port),
                "HOST": "127.0.0.1",
                "WEB_CONCURRENCY": "1",
                "FAIRSCHED_DB_POOL": "1",
                "PATH": f"{bin_dir}{os.pathsep}{self.env.get('PATH', '')}",
            }
            self.web.append(self._spawn(f"web-{index}", ["sh", "-c", command], env))
            self.web_ports.append(port)
        for port, child in zip(self.web_ports, self.web, strict=True):
            wait_until(partial(port_accepts, port), what=child.name, alive=child.alive, timeout=60)

    def revive(self) -> list[str]:
        """Restart any child that died on its own; return their names."""
        revived = [self._celery_name(index) for index, child in enumerate(self.celery) if not child.alive()]
        self.start_celery()
        for index, worker in enumerate(self.workers):
            if not worker.alive():
                revived.append(worker.name)
                self.workers[index] = self._start_worker(index)
        return revived

    def stop(self) -> None:
        everyone = [*self.web, *self.celery, *self.workers]
        for child in everyone:
            child.terminate()
        for child in everyone:
            child.wait_or_kill(20)


class LoadRun:
    """One run of a workload on the real stack; `run()` returns the event log."""

    def __init__(
        self,
        workload: Workload,
        *,
        faults: tuple[str, ...],
        temporal_workers: int,
        pg_outage: float,
        drain_timeout: float,
        scratch: Path,
        policy: str = "deficit",
        celery_workers: int = 1,
        web: int = 0,
        leader_kills: int = 0,
        api_requests: int = API_PER_CLIENT,
    ) -> None:
        self.workload = workload
        self.settings: dict[str, Any] = {**SCHEDULER_SETTINGS, "policy": policy}
        self.faults_planned = sorted(faults, key=FAULT_AT.__getitem__)
        self.pg_outage = pg_outage
        self.drain_timeout = drain_timeout
        self.services = Services(scratch)
        self.log_dir = scratch / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.temporal_workers = temporal_workers
        self.celery_workers = celery_workers
        self.web = web
        self.leader_kills_planned = leader_kills
        self.api_requests = api_requests
        self.leader_kills: list[dict[str, Any]] = []
        self.api: list[dict[str, Any]] = []
        self.children: Children | None = None
        self.receiver: RecordingReceiver | None = None
        self.endpoint_id, self.endpoint_cursor, self.endpoint_types = 0, "", list[str]()
        self.t0 = 0.0
        self.faults: list[Fault] = []
        self.eta_enqueue: dict[int, EtaSample] = {}
        self.eta_start: dict[int, EtaSample] = {}
        self.eta_wait: dict[int, list[EtaSample]] = defaultdict(list)
        self.eta_run: dict[int, list[EtaSample]] = defaultdict(list)
        self.running_checked = 0
        self.running_past: list[dict[str, Any]] = []
        self.org_clear: list[dict[str, Any]] = []
        self.samples_taken = 0
        self.samples: list[list[float]] = []
        self.holds: list[dict[str, Any]] = []
        self.pauses: list[dict[str, Any]] = []

    def clock(self) -> float:
        return time.time() - self.t0

    # -- setup -------------------------------------------------------------------------------------

    def setup(self) -> None:
        self.services.start()
        os.environ.update(self.services.env)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")
        os.environ["FAIRSCHED_DEFAULT_DURATION"] = f"{self.workload.mean_duration:.3f}"
        self.services.env["FAIRSCHED_DEFAULT_DURATION"] = os.environ["FAIRSCHED_DEFAULT_DURATION"]
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", "--noinput", verbosity=0)
        self._create_tenants()
        self._register_receiver()
        self.children = Children(
            self.services.env, self.log_dir, self.temporal_workers, celery_workers=self.celery_workers, web=self.web
        )
        self.children.start_workers()
        self.children.start_celery()
        self.children.start_web()

    def _create_tenants(self) -> None:
        from knobs.services import scheduler_config_set
        from orgs.models import Workflow
        from orgs.services import org_create, org_hold, org_turnaround_set, provider_get_or_create
        from scheduling.temporal.workflows import DEMO_WORKFLOW_TYPE

        scheduler_config_set(actor=ACTOR, budget=self.workload.budget, **self.settings)
        for spec in self.workload.workflows:
            params: dict[str, Any] = {"fail_probability": spec.fail_probability}
            provider = None
            if spec.provider:
                provider = provider_get_or_create(slug=spec.provider)
                params["provider"] = spec.provider
            Workflow.objects.create(
                name=spec.name, workflow_type=DEMO_WORKFLOW_TYPE, task_queue=TASK_QUEUE,
                default_cost=spec.cost, provider=provider, params=params,
            )  # fmt: skip
        for org in self.workload.orgs:
            created = org_create(name=org.slug, slug=org.slug, weight=org.weight, actor=ACTOR)
            if org.turnaround is not None:
                turnaround = max(1, round(org.turnaround))
                org_turnaround_set(org=created, turnaround=turnaround, actor=ACTOR, reason="load test: its promise")
            if org.held_until is not None:
                org_hold(org=created, actor=ACTOR, reason="load test: held from the start")

    def _register_receiver(self) -> None:
        """Start the run's webhook receiver and register an endpoint (every event type, every org) at it."""
        from feed.selectors import WEBHOOK_TYPES
        from feed.services import webhook_endpoint_create

        self.receiver = RecordingReceiver()
        self.receiver.start()
        endpoint, secret = webhook_endpoint_create(
            org=None, url=self.receiver.url, event_types=list(WEBHOOK_TYPES), actor=ACTOR
        )
        self.receiver.secret = secret
        self.endpoint_id, self.endpoint_cursor, self.endpoint_types = endpoint.pk, endpoint.cursor, endpoint.event_types

    def _settle_webhooks(self) -> None:
        """After the drain: wait until the endpoint has read the feed to its end and delivered everything."""
        from feed.models import DeliveryState, WebhookDelivery, WebhookEndpoint
        from feed.selectors import feed_now

        def settled() -> bool:
            endpoint = WebhookEndpoint.objects.get(pk=self.endpoint_id)
            pending = WebhookDelivery.objects.filter(endpoint=endpoint, state=DeliveryState.PENDING).exists()
            return endpoint.cursor == feed_now().encode() and not pending

        deadline = time.monotonic() + WEBHOOK_SETTLE_SECONDS
        while time.monotonic() < deadline and not self._db(settled):
            self._revive()
            time.sleep(SAMPLE_SECONDS)

    # -- the run -----------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.setup()
        try:
            self._wait_for_loop()
            self.t0 = time.time()
            self._submit_phase()
            self._drain()
            self._settle_webhooks()
            self._measure_api()
            return self._collect()
        finally:
            if self.receiver is not None:
                self.receiver.stop()
            if self.children is not None:
                self.children.stop()
            self.services.stop()

    def _wait_for_loop(self) -> None:
        """Beat has ticked once (a replan wrote a queue sample): the loop is up."""
        from scheduling.models import QueueSample

        wait_until(lambda: QueueSample.objects.exists(), what="first replan", timeout=60)

    def _submit_phase(self) -> None:
        pending = list(self.workload.charts)
        releases = sorted((org.held_until, org.slug) for org in self.workload.orgs if org.held_until is not None)
        pauses = sorted(self.workload.pauses, key=lambda pause: pause.start)
        faults = list(self.faults_planned)
        kills = [
            (i + 1) / (self.leader_kills_planned + 1) * self.workload.seconds for i in range(self.leader_kills_planned)
        ]
        next_sample = 0.0
        for org in self.workload.orgs:
            if org.held_until is not None:
                self.holds.append({"org": org.slug, "start": 0.0, "end": None})
        while pending or releases or pauses or faults or kills:
            now = self.clock()
            due = [chart for chart in pending if chart.submit_at <= now]
            if due and self._db(partial(self._submit, due)) is not None:
                submitted = {id(chart) for chart in due}
                pending = [chart for chart in pending if id(chart) not in submitted]
            if releases and releases[0][0] <= now and self._db(lambda: self._release(releases[0][1])) is not None:
                releases.pop(0)
            if pauses and pauses[0].start <= now and self._db(lambda: self._pause(pauses[0])) is not None:
                pauses.pop(0)
            if faults and FAULT_AT[faults[0]] * self.workload.seconds <= now:
                self._inject(faults.pop(0))
            if kills and kills[0] <= now:
                kills.pop(0)
                self._kill_leader()
            if now >= next_sample:
                self._db(self._sample)
                next_sample = now + SAMPLE_SECONDS
                self._revive()
            time.sleep(TICK_SECONDS)

    def _drain(self) -> None:
        from charts.models import Chart, ChartState

        deadline = time.monotonic() + self.drain_timeout
        active = [s for s in ChartState.values if s not in ("succeeded", "failed", "cancelled")]
        while time.monotonic() < deadline:
            self._db(self._sample)
            self._revive()
            if self._db(lambda: not Chart.objects.filter(state__in=active).exists()):
                break
            time.sleep(SAMPLE_SECONDS)
        time.sleep(2.0)  # let the last reconcile settle and visibility catch up

    def _db(self, step: Callable[[], T]) -> T | None:
        """Run a step that reads or writes the database; during an outage skip it (None)."""
        from django.db import DatabaseError, InterfaceError, connection

        try:
            return step()
        except (DatabaseError, InterfaceError):
            with contextlib.suppress(Exception):
                connection.close()
            return None

    def _submit(self, due: list[Any]) -> bool:
        from django.utils import timezone

        from charts.services import ChartRequest, chart_submit_bulk
        from orgs.models import Org

        by_org: dict[str, list[Any]] = defaultdict(list)
        for chart in due:
            by_org[chart.org].append(chart)
        now = timezone.now()
        for slug, charts in by_org.items():
            # Each chart's own promise, from its submission (the report reads it back as submitted + due_in).
            items = [
                ChartRequest(
                    c.workflow,
                    c.external_id,
                    {"duration": c.duration},
                    due_at=None if c.due_in is None else now + timedelta(seconds=c.due_in),
                )
                for c in charts
            ]
            chart_submit_bulk(org=Org.objects.get(slug=slug), items=items, actor=ACTOR)
        return True

    def _release(self, slug: str) -> bool:
        from orgs.models import Org
        from orgs.services import org_release

        org_release(org=Org.objects.get(slug=slug), actor=ACTOR, reason="load test: released mid-run")
        for hold in self.holds:
            if hold["org"] == slug and hold["end"] is None:
                hold["end"] = self.clock()
        return True

    def _pause(self, pause: Any) -> bool:
        from datetime import UTC, datetime

        from orgs.services import provider_get_or_create, provider_pause

        until = datetime.fromtimestamp(self.t0 + pause.end, tz=UTC)
        provider_pause(
            provider=provider_get_or_create(slug=pause.provider), until=until, actor=ACTOR,
            reason="load test: provider paused mid-run",
        )  # fmt: skip
        orgs = [
            org.slug for org in self.workload.orgs if self.workload.workflow(org.workflow).provider == pause.provider
        ]
        self.pauses.append({"provider": pause.provider, "orgs": orgs, "start": self.clock(), "end": pause.end})
        return True

    def _sample(self) -> bool:
        """Keep each waiting chart's first ETA (at enqueue) and its latest before its first dispatch;
        every WAIT_SAMPLE_EVERY samples, the ETAs over the first wait and over the runs, and the orgs'
        clear-times. Every running chart's plan row is checked each time: one whose ETA is before
        the sample's instant is kept (`running_past`): the portal would show it as past."""
        from charts.models import ChartPlan, ChartState
        from orgs.models import Org
        from scheduling.snapshot import Epoch

        now = self.clock()
        over_the_wait = self.samples_taken % WAIT_SAMPLE_EVERY == 0
        self.samples_taken += 1
        rows = ChartPlan.objects.filter(
            chart__state__in=[ChartState.QUEUED, ChartState.RETRY_WAIT], eta__isnull=False
        ).values_list(
            "chart_id", "chart__attempt", Epoch("eta"), Epoch("eta_low"), Epoch("eta_high"), Epoch("predicted_start")
        )
        for chart_id, attempt, eta, low, high, start in rows:
            sample = EtaSample(now, eta - self.t0, _shift(low, self.t0), _shift(high, self.t0), _shift(start, self.t0))
            self.eta_enqueue.setdefault(chart_id, sample)
            if attempt == 0:
                self.eta_start[chart_id] = sample
                if over_the_wait:
                    self.eta_wait[chart_id].append(sample)
        running = ChartPlan.objects.filter(chart__state=ChartState.RUNNING, eta__isnull=False).values_list(
            "chart_id", Epoch("eta"), Epoch("eta_low"), Epoch("eta_high")
        )
        for chart_id, eta, low, high in running:
            sample = EtaSample(now, eta - self.t0, _shift(low, self.t0), _shift(high, self.t0))
            self.running_checked += 1
            if sample.eta < now:
                self.running_past.append({"chart": chart_id, **asdict(sample)})
            if over_the_wait:
                self.eta_run[chart_id].append(sample)
        if over_the_wait:
            for slug, clear in Org.objects.filter(clear_at__isnull=False).values_list("slug", Epoch("clear_at")):
                self.org_clear.append({"at": now, "org": slug, "clear": clear - self.t0})
        return True

    def _revive(self) -> None:
        assert self.children is not None
        for name in self.children.revive():
            now = self.clock()
            self.faults.append(Fault(f"crash:{name}", now, now, "died on its own; restarted"))

    # -- faults ------------------------------------------------------------------------------------

    def _inject(self, kind: str) -> None:
        assert self.children is not None
        if kind == "kill_worker":
            caught = self._wait_for_dispatch()
            fault = Fault(kind, self.clock(), detail="a chart was being dispatched" if caught else "no dispatch seen")
            self.children.kill_celery()
            time.sleep(WORKER_RESTART_DELAY)
            self.children.start_celery()
        elif kind == "temporal":
            fault = Fault(kind, self.clock())
            self.services.restart_temporal()
        elif kind == "redis":
            fault = Fault(kind, self.clock())
            self.services.restart_redis()
        elif kind == "postgres":
            fault = Fault(kind, self.clock(), detail=f"stopped for {self.pg_outage:.0f} s")
            self.services.stop_postgres()
            time.sleep(self.pg_outage)
            self.services.start_postgres()
        else:
            raise ValueError(f"unknown fault {kind!r}")
        fault.restored = self.clock()
        self.faults.append(fault)

    def _wait_for_dispatch(self) -> bool:
        """Wait (a few seconds at most) until some chart is `dispatching`: the worker is mid-dispatch."""
        from charts.models import Chart, ChartState

        deadline = time.monotonic() + KILL_WINDOW_SECONDS
        while time.monotonic() < deadline:
            if self._db(lambda: Chart.objects.filter(state=ChartState.DISPATCHING).exists()):
                return True
            time.sleep(0.005)
        return False

    def _leader(self) -> str | None:
        """The application name of the process holding the dispatcher's lock now, if any."""
        from django.db import connection

        from scheduling.dispatch import DISPATCH_LOCK

        def holder() -> str | None:
            with connection.cursor() as cursor:
                cursor.execute(LEADER_QUERY, [DISPATCH_LOCK >> 32, DISPATCH_LOCK & 0xFFFFFFFF])
                row = cursor.fetchone()
            return str(row[0]) if row else None

        return self._db(holder)

    def _kill_leader(self) -> None:
        """Kill -9 the dispatcher mid-pass and time the failover. Steps:

        1. Poll `pg_locks` (every `LOCK_POLL_SECONDS`, `KILL_WINDOW_SECONDS` at most) until a Celery
           pool process holds the dispatcher's advisory lock: it is mid-pass. Its connection's
           application name ("fairsched-celery-<pid>") gives its pid.
        2. SIGKILL it. Its connection dies with it, so PostgreSQL frees the lock at once; its Celery
           parent starts a new pool process.
        3. Poll until a process holds the lock again (the next pass of any worker): the failover time.
        """
        deadline = time.monotonic() + KILL_WINDOW_SECONDS
        holder = None
        while time.monotonic() < deadline:
            holder = self._leader()
            if holder and holder.startswith("fairsched-celery-"):
                break
            holder = None
            time.sleep(LOCK_POLL_SECONDS)
        if holder is None:
            self.leader_kills.append({"at": self.clock(), "holder": None, "failover": None})
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(holder.rsplit("-", 1)[1]), signal.SIGKILL)
        killed_at = self.clock()
        failover = None
        deadline = time.monotonic() + FAILOVER_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            leader = self._leader()
            if leader and leader != holder:
                failover = self.clock() - killed_at
                break
            time.sleep(LOCK_POLL_SECONDS)
        self.leader_kills.append({"at": killed_at, "holder": holder, "failover": failover, "next_leader": leader})

    def _measure_api(self) -> None:
        """With web processes: the status read's throughput through one of them, then through all."""
        assert self.children is not None
        ports = self.children.web_ports
        if not ports:
            return
        from django.contrib.auth.models import User

        from charts.models import Chart
        from orgs.access import api_token_issue
        from orgs.models import Membership, Org

        org = Org.objects.order_by("id").first()
        assert org is not None
        tokens = []
        for index in range(API_CLIENTS):
            user = User.objects.create(username=f"api-load-{index}")
            Membership.objects.create(user=user, org=org, role=Membership.Role.MEMBER)
            tokens.append(api_token_issue(user=user, org=org))
        chart_ids = list(Chart.objects.filter(org=org).values_list("id", flat=True)[:1000])
        for count in sorted({1, len(ports)}):
            figures = status_throughput(
                ports=ports[:count], tokens=tokens, chart_ids=chart_ids, per_client=self.api_requests
            )
            self.api.append(asdict(figures))

    # -- the record --------------------------------------------------------------------------------

    def _collect(self) -> dict[str, Any]:
        from charts.models import Chart, ChartEvent
        from scheduling.dispatch import workflow_id_for
        from scheduling.snapshot import to_seconds
        from scheduling.temporal.client import describe_workflow

        planned = {(c.org, c.external_id): c for c in self.workload.charts}
        costs = {w.name: w.cost for w in self.workload.workflows}
        charts = []
        known_ids: set[str] = set()
        for chart in Chart.objects.select_related("org", "workflow").order_by("id"):
            plan = planned[(chart.org.slug, chart.external_id)]
            created = to_seconds(chart.created_at)
            runs = []
            for run in range(1, chart.runs + 1):
                workflow_id = workflow_id_for(chart, run, created)
                known_ids.add(workflow_id)
                outcome = describe_workflow(workflow_id)
                runs.append(
                    {
                        "run": run,
                        "workflow_id": workflow_id,
                        "status": outcome.status if outcome else None,
                        "start": _rel(outcome.start_time, self.t0) if outcome else None,
                        "close": _rel(outcome.close_time, self.t0) if outcome else None,
                    }
                )
            enqueue, start = self.eta_enqueue.get(chart.pk), self.eta_start.get(chart.pk)
            charts.append(
                {
                    "id": chart.pk,
                    "org": chart.org.slug,
                    "external_id": chart.external_id,
                    "workflow": chart.workflow.name,
                    "cost": costs[chart.workflow.name],
                    "planned_duration": plan.duration,
                    "planned_submit": plan.submit_at,
                    "due_in": plan.due_in,
                    "submitted": created - self.t0,
                    "state": chart.state,
                    "attempt": chart.attempt,
                    "started": _rel(chart.started_at, self.t0),
                    "finished": _rel(chart.finished_at, self.t0),
                    "eta_enqueue": asdict(enqueue) if enqueue else None,
                    "eta_start": asdict(start) if start else None,
                    "eta_wait": [asdict(sample) for sample in self.eta_wait.get(chart.pk, [])],
                    "eta_run": [asdict(sample) for sample in self.eta_run.get(chart.pk, [])],
                    "runs": runs,
                }
            )
        transitions = [
            [chart_id, _rel(at, self.t0), from_state, to_state]
            for chart_id, at, from_state, to_state in ChartEvent.objects.order_by("at", "id").values_list(
                "chart_id", "at", "from_state", "to_state"
            )
        ]
        unknown = sorted(_temporal_chart_ids() - known_ids)
        return {
            "meta": {
                "seed": self.workload.seed,
                "seconds": self.workload.seconds,
                "budget": self.workload.budget,
                "planned_charts": len(self.workload.charts),
                "t0": self.t0,
                "ended": self.clock(),
                "default_duration": self.workload.mean_duration,
                "drift": asdict(self.workload.drift) if self.workload.drift else None,
                "faults_requested": list(self.faults_planned),
                "temporal_workers": self.temporal_workers,
                "celery_workers": self.celery_workers,
                "web_processes": self.web,
                "settings": self.settings,
            },
            "orgs": [asdict(org) for org in self.workload.orgs],
            "workflows": [asdict(workflow) for workflow in self.workload.workflows],
            "holds": self.holds,
            "pauses": self.pauses,
            "faults": [asdict(fault) for fault in self.faults],
            "charts": charts,
            "transitions": transitions,
            "org_clear": self.org_clear,
            "running_etas": {"checked": self.running_checked, "past": self.running_past},
            "temporal_unknown_workflows": unknown,
            "leader_kills": self.leader_kills,
            "api": self.api,
            "webhooks": {
                **feed_and_log(event_types=self.endpoint_types, after_cursor=self.endpoint_cursor),
                "receipts": self.receiver.snapshot() if self.receiver is not None else [],
            },
        }


def _temporal_chart_ids() -> set[str]:
    """Every chart workflow id Temporal has, open or closed."""
    from scheduling.temporal.client import temporal_call

    async def list_ids(client: Any) -> set[str]:
        return {execution.id async for execution in client.list_workflows('WorkflowId STARTS_WITH "chart-"')}

    result: set[str] = temporal_call(list_ids)
    return result


def _shift(value: float | None, t0: float) -> float | None:
    return None if value is None else value - t0


def _rel(moment: Any, t0: float) -> float | None:
    return None if moment is None else moment.timestamp() - t0


@contextlib.contextmanager
def scratch_dir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fairsched-load-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("LOADRUN_SECONDS", 180)))
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--policy", choices=["round_robin", "deficit"], default="deficit")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faults", default=",".join(ALL_FAULTS), help="comma-separated; empty for none")
    parser.add_argument("--temporal-workers", type=int, default=1)
    parser.add_argument("--celery-workers", type=int, default=1, help="Celery workers, each with beat")
    parser.add_argument("--web", type=int, default=0, help="web processes (the Procfile's command)")
    parser.add_argument("--leader-kills", type=int, default=0, help="kill -9 the dispatcher mid-pass N times")
    parser.add_argument(
        "--api-requests", type=int, default=API_PER_CLIENT, help="status reads per API client and web setup"
    )
    parser.add_argument("--pg-outage", type=float, default=8.0)
    parser.add_argument("--drain-timeout", type=float, default=None)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "reports" / "events.json")
    parser.add_argument("--keep-scratch", action="store_true", help="keep the services' data and logs")
    return parser.parse_args(argv)


def run_to_file(args: argparse.Namespace) -> Path:
    """Run the workload as `args` say and write the event log; return its path."""
    faults = tuple(f for f in args.faults.split(",") if f)
    unknown = set(faults) - set(ALL_FAULTS)
    if unknown:
        raise SystemExit(f"unknown faults: {', '.join(sorted(unknown))}")
    workload = build(seconds=args.seconds, budget=args.budget, seed=args.seed)
    with scratch_dir(args.keep_scratch) as scratch:
        run = LoadRun(
            workload,
            faults=faults,
            temporal_workers=args.temporal_workers,
            pg_outage=args.pg_outage,
            drain_timeout=args.drain_timeout or max(120.0, 1.5 * args.seconds),
            scratch=scratch,
            policy=args.policy,
            celery_workers=args.celery_workers,
            web=args.web,
            leader_kills=args.leader_kills,
            api_requests=args.api_requests,
        )
        log = run.run()
        logs = args.out.parent / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        shutil.copytree(scratch / "logs", logs, ignore=shutil.ignore_patterns("beat-schedule*"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(log, indent=1))
    return Path(args.out)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> None:
    """Run, write the log, and leave with `os._exit` (a process that used a Temporal client can abort
    while the interpreter finalizes: temporalio sdk-python issue 300)."""
    code = 0
    # SIGTERM (a timeout, a CI runner) unwinds like Ctrl-C, so the services and children are stopped.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        path = run_to_file(parse_args(argv))
        print(f"event log written to {path}", flush=True)
    except BaseException as err:
        print(f"load run failed: {err!r}", file=sys.stderr, flush=True)
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
