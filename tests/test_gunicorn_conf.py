"""gunicorn's configuration for the web process, as gunicorn itself loads it."""

from __future__ import annotations

import pytest
from gunicorn.app.base import Application
from gunicorn.config import Config


def loaded() -> Config:
    """The configuration gunicorn builds from `-c python:fairsched.gunicorn_conf` (its own loader)."""
    application = Application.__new__(Application)  # no command line parsed
    application.cfg = Config()
    application.load_config_from_module_name_or_filename("python:fairsched.gunicorn_conf")
    return application.cfg


def test_the_web_process_opens_no_control_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSCHED_DB_POOL", "0")  # the module sets it if unset; keep this process as it was
    config = loaded()
    if "control_socket_disable" not in config.settings:
        pytest.skip("this gunicorn has no control socket (before 25.1)")
    # One socket path for every instance on the host: two web processes would take it from each other.
    assert config.control_socket_disable is True
