"""Pytest plugin: each xdist worker gets a Redis database and key prefixes of its own.

`make test` runs the suite on two xdist workers. Each has its own test database already
(pytest-django appends the worker id to its name) and starts its own Temporal dev server, daphnes,
Chromium and Celery workers; but they would all share the one Redis database, so a Celery worker
started by one test worker would take the tasks another one queued. Loaded with `-p` (from
`addopts`), this module runs before pytest-django reads the settings, so it can still move
`REDIS_URL` (and the broker, the cache and the channel layer with it) to database N + k for worker k.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def worker_redis_url(url: str, worker: int) -> str:
    """`url` with its database number moved up by `worker` (no number: database 0)."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{base + worker}"))


def _isolate(worker_id: str) -> None:
    worker = int(worker_id.removeprefix("gw"))
    os.environ["REDIS_URL"] = worker_redis_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), worker)
    os.environ.pop("CELERY_BROKER_URL", None)
    for prefix in ("CHANNELS_PREFIX", "CACHE_PREFIX"):
        os.environ[prefix] = f"{os.environ.get(prefix, 'fairsched')}-{worker_id}"


if "PYTEST_XDIST_WORKER" in os.environ:
    _isolate(os.environ["PYTEST_XDIST_WORKER"])
