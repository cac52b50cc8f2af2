"""Temporal connection settings: the connect arguments built from them, and connecting for real to the
dev server (TLS off), with retry while the server is not up yet, and a TLS handshake a plain server
cannot answer."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from fairsched.devservices import REPO_ROOT, free_port, start_temporal
from scheduling.temporal.connection import (
    TemporalConfigError,
    TemporalSettings,
    TemporalUnavailable,
    connect_arguments,
    connect_client,
)
from tests.processes import service


def test_plain_connection_has_no_tls_and_no_key() -> None:
    arguments = connect_arguments(TemporalSettings(address="temporal:7233", namespace="prod"))
    assert arguments == {"namespace": "prod", "tls": False}


def test_an_api_key_is_sent_over_tls_with_the_system_cas() -> None:
    config = TemporalSettings(address="ns.acct.tmprl.cloud:7233", namespace="ns.acct", tls=True, api_key="k-123")
    assert connect_arguments(config) == {"namespace": "ns.acct", "tls": True, "api_key": "k-123"}


def test_client_certificate_ca_and_server_name_are_read_into_the_tls_config(tmp_path: Path) -> None:
    for name in ("client.pem", "client.key", "ca.pem"):
        (tmp_path / name).write_bytes(f"-----BEGIN {name}-----\n".encode())
    config = TemporalSettings(
        tls=True,
        tls_cert=str(tmp_path / "client.pem"),
        tls_key=str(tmp_path / "client.key"),
        tls_ca=str(tmp_path / "ca.pem"),
        tls_server_name="temporal.internal",
    )
    tls = connect_arguments(config)["tls"]
    assert isinstance(tls, TLSConfig)
    assert tls.client_cert == b"-----BEGIN client.pem-----\n"
    assert tls.client_private_key == b"-----BEGIN client.key-----\n"
    assert tls.server_root_ca_cert == b"-----BEGIN ca.pem-----\n"
    assert tls.domain == "temporal.internal"


def test_an_unreadable_certificate_names_its_variable(tmp_path: Path) -> None:
    config = TemporalSettings(tls=True, tls_cert=str(tmp_path / "missing.pem"), tls_key=str(tmp_path / "k"))
    with pytest.raises(TemporalConfigError, match=r"^TEMPORAL_TLS_CERT: cannot read .*missing\.pem"):
        connect_arguments(config)


def test_the_settings_refuse_a_certificate_without_its_key() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO_ROOT,
        env={**os.environ, "TEMPORAL_TLS_CERT": "/etc/fairsched/client.pem"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together" in result.stderr


def test_tls_turns_on_with_an_api_key() -> None:
    code = "from django.conf import settings; print(settings.TEMPORAL_TLS)"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO_ROOT,
        env={**os.environ, "TEMPORAL_API_KEY": "k-123"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.splitlines()[-1] == "True"


@pytest.mark.temporal
async def test_connects_to_the_dev_server_with_tls_off(temporal_server: str) -> None:
    client = await connect_client(TemporalSettings(address=temporal_server), timeout=10)
    assert await client.service_client.check_health()


@pytest.mark.temporal
async def test_an_api_key_reaches_a_server_that_does_not_ask_for_one(temporal_server: str) -> None:
    """The dev server ignores the Authorization header; the key goes out without breaking the call."""
    client = await connect_client(TemporalSettings(address=temporal_server, api_key="k-123"), timeout=10)
    assert client.api_key == "k-123"
    assert await client.service_client.check_health()


@pytest.mark.temporal
async def test_a_tls_handshake_with_a_plain_server_fails_naming_where_and_how(temporal_server: str) -> None:
    config = TemporalSettings(address=temporal_server, tls=True)
    with pytest.raises(TemporalUnavailable) as failure:
        await connect_client(config, timeout=1.0)
    message = str(failure.value)
    assert message.startswith(f"cannot connect to Temporal at {temporal_server} namespace default (TLS on)")


@pytest.mark.temporal
@pytest.mark.slow
async def test_start_up_waits_for_a_server_that_comes_up_later(caplog: pytest.LogCaptureFixture) -> None:
    """Connect before the server exists; it starts a little later and the connect succeeds."""
    port = free_port()
    caplog.set_level(logging.WARNING, logger="scheduling.temporal.connection")
    connecting = asyncio.create_task(connect_client(TemporalSettings(address=f"127.0.0.1:{port}"), timeout=120))
    while not any("not reachable (attempt 1)" in record.getMessage() for record in caplog.records):
        assert not connecting.done()
        await asyncio.sleep(0.1)
    server = service(await asyncio.to_thread(start_temporal, port=port))
    try:
        client = await connecting
        assert await client.service_client.check_health()
    finally:
        await asyncio.to_thread(server.stop)
