"""Logs as JSON lines when FAIRSCHED_LOG_JSON is set, plain lines otherwise."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from fairsched.devservices import REPO_ROOT
from fairsched.logs import JsonFormatter

LOG_A_LINE = (
    "import logging; "
    "logging.getLogger('fairsched.probe').warning('chart %s held', 7, extra={'chart': 7, 'org': 'acme'})"
)


def test_a_record_becomes_one_json_object_with_its_extra_fields() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("fairsched.x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    record.chart = 7
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "fairsched.x"
    assert entry["message"] == "failed here"
    assert entry["chart"] == 7
    assert entry["process"] == os.getpid()
    assert entry["time"].endswith("+00:00")
    assert "ValueError: boom" in entry["exception"]


def test_a_value_json_cannot_hold_is_written_as_text() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
    record.when = object()
    assert json.loads(JsonFormatter().format(record))["when"].startswith("<object object")


def log_from_django(**env: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", LOG_A_LINE],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stderr.strip().splitlines()[-1]


def test_django_processes_log_json_lines_when_asked() -> None:
    entry = json.loads(log_from_django(FAIRSCHED_LOG_JSON="1"))
    assert entry["logger"] == "fairsched.probe"
    assert entry["message"] == "chart 7 held"
    assert (entry["chart"], entry["org"]) == (7, "acme")


def test_plain_lines_by_default() -> None:
    line = log_from_django(FAIRSCHED_LOG_JSON="0")
    assert line.endswith("WARNING fairsched.probe chart 7 held")
