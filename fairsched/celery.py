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


@worker_process_init.connect
def pool_child_ignores_sigterm(**kwargs: Any) -> None:
    """A pool child ignores SIGTERM; its parent alone decides when it stops.

    Process managers stop a worker by signalling its whole process group (honcho, systemd's default
    `KillMode=control-group`), so each pool child gets the SIGTERM too. A child that died of it would
    lose the pass it is running (`WorkerLostError`). Ignoring it, the child finishes its task while the
    parent does Celery's warm shutdown (stop consuming, wait for the running tasks), then the parent
    stops it. SIGKILL still ends everything, and reconcile settles what a killed pass left.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
