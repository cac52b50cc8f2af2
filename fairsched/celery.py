"""The Celery app: the worker runs the scheduler passes, beat fires them on their intervals."""

import os
import signal
import threading
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

app = Celery("fairsched")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# One tick a second; the tick decides which passes are due (their intervals live in the database).
app.conf.beat_schedule = {"scheduler-tick": {"task": "scheduling.tasks.tick", "schedule": 1.0}}


APPLICATION_NAME = "fairsched-celery-{pid}"


@worker_init.connect
def load_compiled_core(**kwargs: Any) -> None:
    """The worker loads the core's compiled replay before it forks its pool, so that every child
    (the replan's process) has it from its first plan: a replan of a large queue then takes it
    without the ~0.6 s its first load costs, nor, in a fresh checkout, the ~4-7 s of CPU numba takes
    to compile it (cached on disk after). Here and not in each child: a child that takes longer than
    Celery's few seconds to start is killed, and forked children share the loaded code."""
    from scheduling.core import load_compiled_replay  # here: only the worker pays for the core's import

    load_compiled_replay()


@worker_process_init.connect
def pool_child_setup(**kwargs: Any) -> None:
    """A pool child names its database connections "fairsched-celery-<pid>" (libpq reads `PGAPPNAME`),
    so `pg_stat_activity` and `pg_locks` tell which worker process holds what, the dispatcher's
    advisory lock included (the multi-instance run finds the leader to kill that way)."""
    os.environ["PGAPPNAME"] = APPLICATION_NAME.format(pid=os.getpid())


_sigterm_handler: Any = None


@task_prerun.connect
def defer_sigterm(**kwargs: Any) -> None:
    """While a pool child runs a task, SIGTERM cannot kill it; its parent alone decides when it stops.

    Process managers stop a worker by signalling its whole process group (honcho, systemd's default
    `KillMode=control-group`), so each pool child gets the SIGTERM too. A child that died of it would
    lose the pass it is running (`WorkerLostError`). Ignoring it for the task's length, the child
    finishes while the parent does Celery's warm shutdown (stop consuming, wait for the running
    tasks), then stops its idle children. SIGKILL still ends everything, and reconcile settles what a
    killed pass left. (Signals can be set only from a process's main thread, as prefork children run.)
    """
    global _sigterm_handler
    if threading.current_thread() is threading.main_thread():
        _sigterm_handler = signal.signal(signal.SIGTERM, signal.SIG_IGN)


@task_postrun.connect
def restore_sigterm(**kwargs: Any) -> None:
    """After the task, SIGTERM acts again as it did before it."""
    if _sigterm_handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _sigterm_handler)
