"""The what-if's base handed over by the replan (`scheduling.what_if.base_hand_over`): the first
preview of a plan version in any process reads neither the queue nor plans it as it stands, and
answers as a base read at the replan's instant does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from charts.models import Chart, ChartState
from common.actors import Actor
from knobs.models import SchedulerConfig
from orgs.models import Provider
from scheduling import core, what_if
from scheduling.models import QueueSample
from scheduling.replan import plan_refresh
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory
from tests.processes import running

CHANGES: list[dict[str, Any]] = [
    {},
    {"weights": {"acme": 5}},
    {"hold": ["acme"]},
    {"caps": {"acme": 1, "beta": None}},
    {"queue_limits": {"acme": 2}},
    {"budget": 3, "policy": "deficit", "quantum": 2.5},
    {"aging_step": 30, "aging_cap": 5},
    {"costs": [{"org": "beta", "workflow": "render", "cost": 3}]},
    {"provider_pauses": [{"provider": "llm", "org": "acme", "until": datetime(2099, 1, 1, tzinfo=UTC)}]},
]


@pytest.fixture
def queue(tenants: Tenants) -> list[Chart]:
    """Budget 2; acme and beta have six charts waiting each, due within the hour, behind `llm`; one runs."""
    SchedulerConfig.objects.update_or_create(id=1, defaults={"budget": 2})
    tenants.workflow.provider = cast(Provider, ProviderFactory(slug="llm"))
    tenants.workflow.save()
    start = timezone.now() - timedelta(minutes=5)
    charts: list[Chart] = []
    for index in range(6):
        for org in (tenants.org_a, tenants.org_b):
            chart = cast(Chart, ChartFactory(org=org, workflow=tenants.workflow, state=ChartState.QUEUED))
            Chart.objects.filter(pk=chart.pk).update(
                created_at=start + timedelta(seconds=index), due_at=start + timedelta(minutes=3 + index)
            )
            charts.append(chart)
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.RUNNING, started_at=start)
    return charts


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Forget the base this process keeps, as another web process would never have had it."""

    def forget() -> None:
        monkeypatch.setattr(what_if, "_base_cache", what_if._BaseCache())

    forget()
    return forget


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The core plans the what-if makes (one entry each); a snapshot it reads fails the test."""
    made: list[int] = []
    real_plan = core.plan

    def counted(scenario: core.Scenario) -> core.Plan:
        made.append(len(scenario.queued))
        return real_plan(scenario)

    def no_read(**_: Any) -> None:
        raise AssertionError("the what-if read a snapshot")

    monkeypatch.setattr(what_if.core, "plan", counted)
    monkeypatch.setattr(what_if, "load_snapshot", no_read)
    return made


@pytest.fixture
def replanned(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """A replan whose after-commit callbacks run (the hand-over among them)."""

    def run(**kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return plan_refresh(**kwargs)

    return run


def test_the_first_preview_of_a_version_plans_only_the_change(
    queue: list[Chart], replanned: Callable[..., Any], fresh_process: Callable[[], None], request: Any
) -> None:
    """After a replan, a process that never previewed answers its first preview with the replan's
    snapshot and plan: no snapshot read, one core plan (the change's); the base is kept for the next."""
    replanned()
    plans = request.getfixturevalue("plans")

    what_if.plan_preview(changes={"weights": {"acme": 5}})
    base = what_if.what_if_base()

    assert plans == [len(queue)]
    sample = QueueSample.objects.latest("id")
    assert base.snapshot.now == sample.at
    assert isinstance(base.before, what_if.BasePlan)
    assert what_if.what_if_base() is base


@pytest.mark.parametrize("changes", CHANGES, ids=lambda changes: "+".join(changes) or "none")
def test_a_handed_base_answers_as_a_base_read_at_the_replans_instant(
    queue: list[Chart], replanned: Callable[..., Any], fresh_process: Callable[[], None], changes: dict[str, Any]
) -> None:
    """The preview and the rescue on the handed base are those on a base read from the database at
    the replan's instant (read before the replan, which writes the orgs' rounds)."""
    from scheduling.rescue import rescue_find

    instant = timezone.now()
    read = what_if.plan_preview(changes=changes, now=instant)
    read_rescue = rescue_find(now=instant).answer(applied=False)
    replanned(now=instant)

    assert what_if.plan_preview(changes=changes) == read
    assert rescue_find().answer(applied=False) == read_rescue
    assert set(read["orgs"]) == {"acme", "beta"}


def test_the_handed_plan_is_the_plan_of_the_handed_snapshot(
    queue: list[Chart], replanned: Callable[..., Any], fresh_process: Callable[[], None]
) -> None:
    """What the replan hands over is its snapshot's plan, to the bit: the core's plan of the scenario
    that comes out of the cache."""
    replanned()
    base = what_if.what_if_base()

    planned = core.plan(base.snapshot.scenario)

    for name in ("queued", "start", "eta", "eta_low", "eta_high", "late_chance"):
        np.testing.assert_array_equal(getattr(base.before.arrays, name), getattr(planned.arrays, name), name)
    assert (base.before.org_clear, base.before.global_clear) == (planned.org_clear, planned.global_clear)


def test_a_lever_pulled_after_the_replan_is_a_version_of_its_own(
    tenants: Tenants, queue: list[Chart], replanned: Callable[..., Any], fresh_process: Callable[[], None]
) -> None:
    """The handed base is the replan's version only: after a lever is pulled, the preview reads a
    base that has it."""
    from orgs.services import org_weight_set
    from scheduling.snapshot import org_key

    replanned()
    org_weight_set(org=tenants.org_a, weight=3, actor=Actor.system("test"))

    assert what_if.what_if_base().rows[org_key(tenants.org_a.pk)].weight == 3


def test_a_key_of_another_database_is_not_taken(
    queue: list[Chart], replanned: Callable[..., Any], fresh_process: Callable[[], None]
) -> None:
    """A base kept under the version's key but not made by the replan that wrote the version's sample
    (a database made again counts its ids from 1 again) is not taken: the preview reads its own."""
    replanned()
    version = what_if.plan_version()
    assert version is not None
    handed = cache.get(what_if._handed_key(version))
    earlier = replace(handed.snapshot, now=handed.snapshot.now - timedelta(hours=1))
    cache.set(what_if._handed_key(version), replace(handed, snapshot=earlier))

    assert what_if._handed_base(version) is None
    assert what_if.what_if_base().snapshot.now != earlier.now  # read afresh


def test_the_cache_holds_the_last_base_only(
    queue: list[Chart], replanned: Callable[..., Any], fresh_process: Callable[[], None]
) -> None:
    """A replan's hand-over drops the base handed over before it: only the last version is previewed."""
    replanned()
    first = what_if.plan_version()
    replanned()
    second = what_if.plan_version()
    assert first is not None
    assert second not in (None, first)
    assert second is not None

    assert cache.get(what_if._handed_key(first)) is None
    assert cache.get(what_if._handed_key(second)) is not None


def test_a_large_queue_is_not_handed_over(
    queue: list[Chart], replanned: Callable[..., Any], settings: Any, fresh_process: Callable[[], None]
) -> None:
    settings.FAIRSCHED_WHAT_IF_HANDOVER_MAX_CHARTS = len(queue) - 1
    replanned()
    version = what_if.plan_version()
    assert version is not None

    assert cache.get(what_if._handed_key(version)) is None
    assert what_if.what_if_base().before is not None  # read by the preview itself


def test_a_failing_cache_costs_the_previews_their_own_read_only(
    queue: list[Chart],
    replanned: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    fresh_process: Callable[[], None],
) -> None:
    """The cache is a shortcut: a replan whose hand-over fails still replans; a preview whose read
    fails reads its own base."""

    def broken(*_: Any, **__: Any) -> None:
        raise ConnectionError("redis is down")

    monkeypatch.setattr(cache, "set", broken)
    monkeypatch.setattr(cache, "get", broken)

    assert replanned().queued == len(queue)
    assert what_if.plan_preview(changes={"weights": {"acme": 5}})["charts_moved"] > 0


@pytest.fixture
def committed_queue(transactional_db: None, tenants: Tenants, queue: list[Chart]) -> Iterator[list[Chart]]:
    yield queue
    cache.clear()


def test_concurrent_first_previews_share_the_handed_base(
    committed_queue: list[Chart], fresh_process: Callable[[], None], request: Any
) -> None:
    """Previews of a fresh version in several threads at once (each on its own connection) all take
    the handed base, none reads a snapshot, and they answer alike."""
    plan_refresh()  # committed: its hand-over runs at once
    plans = request.getfixturevalue("plans")
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def preview() -> None:
        try:
            barrier.wait()
            answers.append(what_if.plan_preview(changes={"weights": {"beta": 4}}))
        except BaseException as error:  # (reported by the test thread below)
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=preview) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(answers) == 4
    assert all(answer == answers[0] for answer in answers)
    assert plans == [len(committed_queue)] * 4  # each the plan of its change, none of the queue as it stands


# Another process: Django set up on the same database and cache, a preview that may not read a snapshot.
CHILD = """
import json

import django

django.setup()
from scheduling import what_if


def no_read(**_):
    raise AssertionError("the other process read a snapshot")


what_if.load_snapshot = no_read
print(json.dumps(what_if.plan_preview(changes={"weights": {"beta": 4}})))
"""


def test_another_process_takes_the_handed_base(
    committed_queue: list[Chart], fresh_process: Callable[[], None], settings: Any
) -> None:
    """A process that never previewed (another web worker) answers the first preview of the version
    with the base the replan handed over, as this process does."""
    plan_refresh()  # committed: its hand-over runs at once
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}:{database['PASSWORD'] or ''}@{database['HOST']}"
        f":{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "CACHE_PREFIX": settings.CACHES["default"]["KEY_PREFIX"],
        "DJANGO_SETTINGS_MODULE": "fairsched.settings",
    }
    with running(
        [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        out, err = child.communicate(timeout=120)

    assert child.returncode == 0, err
    here = what_if.plan_preview(changes={"weights": {"beta": 4}})
    assert json.loads(out) == json.loads(json.dumps(here))
