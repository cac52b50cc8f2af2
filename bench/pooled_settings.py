"""Settings for the API benchmark's server: the project's, with database connections pooled.

Under ASGI every request runs in a thread of its own, so Django's persistent connections
(CONN_MAX_AGE) are never reused and pile up until PostgreSQL refuses clients. A pool (Django 5.1+
with psycopg-pool) reuses them; without psycopg-pool, each request opens and closes its own.
"""

from importlib.util import find_spec

from fairsched.settings import *  # noqa: F403
from fairsched.settings import DATABASES

DATABASES["default"]["CONN_MAX_AGE"] = 0
DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
if find_spec("psycopg_pool") is not None:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 4, "max_size": 16}
