"""The Celery app: the worker runs the scheduler passes, beat fires them on their intervals."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")

app = Celery("fairsched")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# One tick a second; the tick decides which passes are due (their intervals live in the database).
app.conf.beat_schedule = {"scheduler-tick": {"task": "scheduling.tasks.tick", "schedule": 1.0}}
