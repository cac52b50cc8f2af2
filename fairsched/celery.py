"""The Celery app: the worker runs the scheduler passes, beat fires them on their intervals."""

import os
import signal
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_ready
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

app = Celery("fairsched")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# One tick a second; the tick decides which passes are due (their intervals live in the database).
app.conf.beat_schedule = {"scheduler-tick": {"task": "scheduling.tasks.tick", "schedule": 1.0}}


@app.on_after_configure.connect
def webhooks_tick_schedule(sender: Celery, **kwargs: Any) -> None:
    """The webhooks' tick (collect the change feed's new events, send what is due: feed/tasks.py) every
    FAIRSCHED_WEBHOOK_TICK seconds: read once the settings are loaded, not while this module is imported
    (the settings module may be importing it: `fairsched/__init__.py`)."""
    sender.add_periodic_task(
        settings.FAIRSCHED_WEBHOOK_TICK, sender.signature("feed.tasks.webhooks_tick"), name="webhooks-tick"
    )


APPLICATION_NAME = "fairsched-celery-{pid}"


@worker_init.connect
def load_compiled_core(**kwargs: Any) -> None:
    """The worker loads the core's compiled replay before it forks its pool, so that every child
    (the replan's process) has it from its first plan: a replan of a large queue then takes it
    without paying for its first load, nor, in a fresh checkout, for numba's compile (cached on disk
    after; both measured by bench/bench_core.py). Here and not in each child: a child that takes longer than
    Celery's few seconds to start is killed, and forked children share the loaded code."""
    from scheduling.core import load_compiled_replay  # here: only the worker pays for the core's import

    load_compiled_replay()


@worker_process_init.connect
def pool_child_setup(**kwargs: Any) -> None:
    """A pool child names its database connections "fairsched-celery-<pid>" (libpq reads `PGAPPNAME`),
    so `pg_stat_activity` and `pg_locks` tell which worker process holds what, the dispatcher's
    advisory lock included (the multi-instance run finds the leader to kill that way)."""
    os.environ["PGAPPNAME"] = APPLICATION_NAME.format(pid=os.getpid())


@worker_process_init.connect
def ignore_sigterm(**kwargs: Any) -> None:
    """A pool child is stopped by its parent, never by a SIGTERM of its own.

    Process managers stop a worker by signalling its whole process group (honcho, systemd's default
    `KillMode=control-group`), so each pool child gets the SIGTERM too. A child that died of it lost
    the pass it was running, or the one it had just taken from its parent and not yet begun
    (`WorkerLostError`). Ignoring it from the child's start (billiard keeps an ignored SIGTERM
    ignored when it sets up the child's signals), the parent alone stops: Celery's warm shutdown
    stops consuming, waits for the running passes, then ends its idle children; a cold shutdown
    closes their pipes, which ends them too. SIGKILL still ends everything, and reconcile settles what
    a killed pass left."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@worker_ready.connect
def feed_listener_start(**kwargs: Any) -> None:
    """The worker's parent process hears the feed's commits and starts their webhook deliveries at once
    (`feed.listener`); started once the pool's children are forked, so none inherits its connection."""
    from feed import listener

    listener.start()
