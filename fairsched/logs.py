"""Log configuration shared by every process type: plain lines, or JSON lines for a log pipeline.

`FAIRSCHED_LOG_JSON` (true/false) picks the format and `LOG_LEVEL` the root level. Django reads
`logging_config()` through `settings.LOGGING`; the gunicorn master, which never loads Django's
settings, reads it through `fairsched/gunicorn_conf.py`. Only the standard library is imported here.

A JSON line holds `time` (UTC, ISO 8601 with milliseconds), `level`, `logger`, `message`, `process`
(the pid, so lines of several workers on one host stay apart), `exception` when there is one, and any
`extra={...}` fields the caller passed.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# The attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; values JSON cannot hold are written as their `str`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in line:
                line[key] = value
        return json.dumps(line, default=str, ensure_ascii=False)


class ClientGoneFilter(logging.Filter):
    """Drops the error Django logs when a client went away while sending its body (its
    `UnreadablePostError`, recognised by name: only the standard library is imported here): the answer
    has nobody to go to, and nothing is wrong with the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "UnreadablePostError"


def logging_config(*, json_lines: bool, level: str = "INFO", access_log: bool = False) -> dict[str, Any]:
    """The `logging.config.dictConfig` of every process: one console handler on the root logger.

    Django's own loggers, Celery's, gunicorn's and uvicorn's propagate to the root, so they come out in
    the same format. Database query logs stay at WARNING (DEBUG would log every query), and so does
    the web server's line per request unless `access_log`.
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
            "json": {"()": "fairsched.logs.JsonFormatter"},
        },
        "filters": {"client_gone": {"()": "fairsched.logs.ClientGoneFilter"}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "json" if json_lines else "plain"},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.db.backends": {"level": "WARNING"},
            "django.request": {"filters": ["client_gone"]},
            # django-axes announces its version at every process start; lockouts are warnings.
            "axes": {"level": "WARNING"},
            # gunicorn and uvicorn attach handlers of their own; theirs go, the root's format stays.
            "gunicorn.error": {"handlers": [], "propagate": True},
            "gunicorn.access": {"handlers": [], "propagate": True},
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": True, "level": "INFO" if access_log else "WARNING"},
        },
    }
