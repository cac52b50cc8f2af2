"""How every fairsched process connects to Temporal: address, namespace, TLS, API key, retry.

The settings (read from Django's settings at call time, so tests can move them):

- `TEMPORAL_ADDRESS` (host:port) and `TEMPORAL_NAMESPACE`.
- `TEMPORAL_TLS`: connect over TLS. On by default when a client certificate or an API key is set.
- `TEMPORAL_TLS_CERT` / `TEMPORAL_TLS_KEY`: paths of the PEM client certificate and its private key
  (mutual TLS, as a self-hosted cluster or Temporal Cloud with certificates asks); both or neither.
- `TEMPORAL_TLS_CA`: path of the PEM CA that signed the server's certificate (default: the system's).
- `TEMPORAL_TLS_SERVER_NAME`: the name to verify on the server's certificate, when it differs from
  the address's host (a load balancer's address, a tunnel).
- `TEMPORAL_API_KEY`: an API key (Temporal Cloud), sent as a bearer token on every call.
- `TEMPORAL_CONNECT_TIMEOUT`: how many seconds a process keeps trying to connect at start-up before
  it fails (exponential backoff between attempts, `BACKOFF_FIRST_SECONDS` doubling up to
  `BACKOFF_MAX_SECONDS`). A process that starts before Temporal is up waits for it.

`connect_client` is the one place that calls `Client.connect`: the sync bridge
(`scheduling.temporal.client`) and the worker (`scheduling.temporal.worker`) both use it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from common import tracing

logger = logging.getLogger(__name__)

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_CONNECT_TIMEOUT_SECONDS = 60.0
BACKOFF_FIRST_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 10.0


class TemporalConfigError(Exception):
    """A Temporal setting is unusable (a certificate file that cannot be read); the message names it."""


class TemporalUnavailable(Exception):
    """No connection could be made within the connect timeout; the message says where and why."""


@dataclass(frozen=True)
class TemporalSettings:
    """Where and how to connect; hashable, so connected clients can be keyed by it."""

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    tls: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    tls_server_name: str = ""
    api_key: str = ""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS

    @classmethod
    def from_django(cls) -> TemporalSettings:
        """The current Django settings' values (a missing one takes the default)."""
        return cls(
            address=getattr(settings, "TEMPORAL_ADDRESS", DEFAULT_ADDRESS),
            namespace=getattr(settings, "TEMPORAL_NAMESPACE", DEFAULT_NAMESPACE),
            tls=bool(getattr(settings, "TEMPORAL_TLS", False)),
            tls_cert=getattr(settings, "TEMPORAL_TLS_CERT", ""),
            tls_key=getattr(settings, "TEMPORAL_TLS_KEY", ""),
            tls_ca=getattr(settings, "TEMPORAL_TLS_CA", ""),
            tls_server_name=getattr(settings, "TEMPORAL_TLS_SERVER_NAME", ""),
            api_key=getattr(settings, "TEMPORAL_API_KEY", ""),
            connect_timeout=float(getattr(settings, "TEMPORAL_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_SECONDS)),
        )

    def describe(self) -> str:
        """Where this connects, for messages: address, namespace, TLS and key on or off (no secrets)."""
        auth = ", API key" if self.api_key else ""
        cert = ", client certificate" if self.tls_cert else ""
        return f"{self.address} namespace {self.namespace} (TLS {'on' if self.tls else 'off'}{cert}{auth})"


def _read(variable: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise TemporalConfigError(f"{variable}: cannot read {path}: {err.strerror or err}") from None


def tls_config(config: TemporalSettings) -> TLSConfig | bool:
    """The `tls` argument of `Client.connect`: False, True (system CAs, no client certificate), or a
    `TLSConfig` with the certificate files read now."""
    if not config.tls:
        return False
    if not (config.tls_cert or config.tls_ca or config.tls_server_name):
        return True
    return TLSConfig(
        server_root_ca_cert=_read("TEMPORAL_TLS_CA", config.tls_ca) if config.tls_ca else None,
        domain=config.tls_server_name or None,
        client_cert=_read("TEMPORAL_TLS_CERT", config.tls_cert) if config.tls_cert else None,
        client_private_key=_read("TEMPORAL_TLS_KEY", config.tls_key) if config.tls_key else None,
    )


def connect_arguments(config: TemporalSettings) -> dict[str, Any]:
    """The keyword arguments of `Client.connect(config.address, **arguments)`; when tracing, the
    `TracingInterceptor` (the worker takes it from its client)."""
    arguments: dict[str, Any] = {"namespace": config.namespace, "tls": tls_config(config)}
    if interceptors := tracing.temporal_interceptors():
        arguments["interceptors"] = interceptors
    if config.api_key:
        arguments["api_key"] = config.api_key
    return arguments


async def connect_client(
    config: TemporalSettings | None = None, *, runtime: Runtime | None = None, timeout: float | None = None
) -> Client:
    """Connect to Temporal, retrying with exponential backoff until `timeout` seconds have passed.

    Steps:
    1. Build the connect arguments (a certificate that cannot be read fails at once: retrying does
       not make a file appear).
    2. Try to connect; on failure wait `BACKOFF_FIRST_SECONDS`, doubling up to `BACKOFF_MAX_SECONDS`,
       and try again, logging each failure.
    3. When the next attempt would start after the deadline, raise `TemporalUnavailable` naming the
       address, namespace, TLS and the last error.
    """
    config = config or TemporalSettings.from_django()
    arguments = connect_arguments(config)
    if runtime is not None:
        arguments["runtime"] = runtime
    deadline = time.monotonic() + (config.connect_timeout if timeout is None else timeout)
    delay = BACKOFF_FIRST_SECONDS
    attempt = 1
    while True:
        try:
            return await Client.connect(config.address, **arguments)
        except Exception as err:
            if time.monotonic() + delay > deadline:
                raise TemporalUnavailable(
                    f"cannot connect to Temporal at {config.describe()} after {attempt} attempts: {err}"
                ) from err
            logger.warning(
                "Temporal at %s not reachable (attempt %d): %s; retrying in %.1f s",
                config.describe(),
                attempt,
                err,
                delay,
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, BACKOFF_MAX_SECONDS)
        attempt += 1
