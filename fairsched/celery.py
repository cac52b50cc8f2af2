"""The Celery app: the worker runs the scheduler passes, beat fires them on their intervals."""

import os
import signal
from typing import Any

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

app = Celery("fairsched")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# One tick a second; the tick decides which passes are due (their intervals live in the database).
app.conf.beat_schedule = {"scheduler-tick": {"task": "scheduling.tasks.tick", "schedule": 1.0}}


APPLICATION_NAME = "fairsched-celery-{pid}"


@worker_process_init.connect
def pool_child_setup(**kwargs: Any) -> None:
    """A pool child names its database connections and ignores SIGTERM.

    Its connections carry `application_name` "fairsched-celery-<pid>" (libpq reads `PGAPPNAME`), so
    `pg_stat_activity` and `pg_locks` tell which worker process holds what, the dispatcher's advisory
    lock included (the multi-instance run finds the leader to kill that way).

    It ignores SIGTERM: its parent alone decides when it stops.

    Process managers stop a worker by signalling its whole process group (honcho, systemd's default
    `KillMode=control-group`), so each pool child gets the SIGTERM too. A child that died of it would
    lose the pass it is running (`WorkerLostError`). Ignoring it, the child finishes its task while the
    parent does Celery's warm shutdown (stop consuming, wait for the running tasks), then the parent
    stops it. SIGKILL still ends everything, and reconcile settles what a killed pass left.
    """
    os.environ["PGAPPNAME"] = APPLICATION_NAME.format(pid=os.getpid())
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
