"""fairsched: a fair scheduler for long-running, multi-tenant workflows."""

from fairsched.celery import app as celery_app

__all__ = ["celery_app"]
