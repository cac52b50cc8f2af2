"""gunicorn's configuration for the web process (`gunicorn -c python:fairsched.gunicorn_conf ...`).

gunicorn is the process manager: it binds the port, forks `WEB_CONCURRENCY` workers, restarts one that
dies or hangs, and on SIGTERM stops them gracefully. Each worker is uvicorn serving the project's ASGI
application (`fairsched.asgi`), so one process type serves HTTP and the WebSockets of the dashboard and
the portal (Channels, whose groups live in Redis, so a client may reach any worker of any host).

Every value comes from the environment:

- `PORT` (8000) and `HOST` (0.0.0.0): where to listen.
- `WEB_CONCURRENCY` (2): worker processes; about one per core the host gives the web process.
- `FAIRSCHED_WEB_GRACEFUL_SECONDS` (30): after SIGTERM, how long workers may finish the requests they
  hold (new connections are refused at once; open WebSockets are closed with code 1012) before they
  are killed.
- `FAIRSCHED_WEB_TIMEOUT` (60): a worker silent for this long is killed and replaced.
- `FORWARDED_ALLOW_IPS` (127.0.0.1): proxies whose X-Forwarded-* headers are believed (gunicorn's own).
- `FAIRSCHED_ACCESS_LOG` (false): a log line per request (proxies usually keep these already).
- `FAIRSCHED_LOG_JSON`, `LOG_LEVEL`: as for every process (`fairsched/logs.py`).
- `FAIRSCHED_WEB_THREADS` (8): threads of a worker that run requests, each request whole in one thread
  (`fairsched/wsgi_bridge.py`); WebSockets stay on the worker's event loop.
- No control socket (gunicorn 25.1+ opens one for `gunicornc` at `$XDG_RUNTIME_DIR/gunicorn.ctl` or
  `~/.gunicorn/gunicorn.ctl`, one path for every instance a user runs on the host: a second web process,
  or a benchmark's server beside it, takes over the first's socket and removes it when it stops).
  Operators use signals (`kill -HUP`, `-TTIN`, `-TERM`), as every process manager does. Older gunicorn
  ignores the setting, as it ignores every name it does not know.
- `FAIRSCHED_DB_POOL` is on in web processes unless set: each request would otherwise open (and
  PostgreSQL fork a backend for) a connection of its own. Each worker pools up to
  `FAIRSCHED_DB_POOL_SIZE` (16) connections: keep web processes x workers x that under PostgreSQL's
  `max_connections`.
"""

from __future__ import annotations

import os
from typing import Any

from uvicorn_worker import UvicornWorker as _UvicornWorker

from fairsched.logs import logging_config


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


class UvicornWorker(_UvicornWorker):
    """uvicorn with uvloop and httptools when installed, and no lifespan protocol (Django has none)."""

    CONFIG_KWARGS: dict[str, Any] = {"loop": "auto", "http": "auto", "lifespan": "off"}


os.environ.setdefault("FAIRSCHED_DB_POOL", "1")

bind = [f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"]
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "fairsched.gunicorn_conf.UvicornWorker"
graceful_timeout = int(os.environ.get("FAIRSCHED_WEB_GRACEFUL_SECONDS", "30"))
timeout = int(os.environ.get("FAIRSCHED_WEB_TIMEOUT", "60"))
keepalive = 5
control_socket_disable = True
logconfig_dict = logging_config(
    json_lines=_flag("FAIRSCHED_LOG_JSON"),
    level=os.environ.get("LOG_LEVEL", "INFO"),
    access_log=_flag("FAIRSCHED_ACCESS_LOG"),
)
