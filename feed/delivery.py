"""Sending one webhook: the signature, the destination's checks, and one careful HTTP POST.

Signature: `Fairsched-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the
endpoint's secret>`; a receiver recomputes it and refuses a timestamp outside its replay window
(`examples/webhook_receiver.py`).

Destination (checked at registration and again at every send, since DNS can change):
1. `https` only, unless `FAIRSCHED_WEBHOOK_ALLOW_HTTP`;
2. the host is resolved and *every* address it has must be public (no private, loopback,
   link-local, multicast, reserved or unspecified one), unless `FAIRSCHED_WEBHOOK_ALLOW_PRIVATE`;
3. the connection goes to the address that was checked (no second lookup a rebinding DNS could
   answer differently), with TLS verifying the certificate for the URL's host name.
The POST follows no redirect (a 3xx is a failure), times out after `FAIRSCHED_WEBHOOK_TIMEOUT`
seconds to connect and per read, and reads at most `FAIRSCHED_WEBHOOK_RESPONSE_CAP` bytes of the answer,
for at most twice the timeout from the start (the status line and headers are read with the per-read
timeout only).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from common.errors import InvalidInput

SIGNATURE_HEADER = "Fairsched-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT_TYPE_HEADER = "Fairsched-Event-Type"
USER_AGENT = "fairsched-webhooks/1"


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The header's value: `t=<timestamp>,v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str
    port: int
    path: str
    address: str  # the checked address the connection goes to


class Refused(ValueError):
    """A destination the settings do not allow; the message says why."""


def url_check(url: str) -> None:
    """Refuse at registration a URL no send would be allowed to reach (`InvalidInput` naming `url`)."""
    try:
        destination(url)
    except Refused as refused:
        raise InvalidInput(str(refused), field="url") from None


def destination(url: str) -> Destination:
    """Where a POST to `url` may go, after the checks of the module's steps 1 and 2 (`Refused`)."""
    parts = urlsplit(url)
    allowed = ("https", "http") if settings.FAIRSCHED_WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in allowed:
        raise Refused(f"the URL must start with {' or '.join(f'{s}://' for s in allowed)}")
    if not parts.hostname or parts.username or parts.password:
        raise Refused("the URL must name a host, and no user or password")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Refused("the URL's port is not a number from 1 to 65535") from None
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise Refused(f"the host {parts.hostname[:100]!r} does not resolve") from None
    addresses = sorted({str(info[4][0]) for info in infos})
    if not addresses:
        raise Refused(f"the host {parts.hostname[:100]!r} does not resolve")
    if not settings.FAIRSCHED_WEBHOOK_ALLOW_PRIVATE:
        for address in addresses:
            if not _public(address):
                raise Refused(f"the host {parts.hostname[:100]!r} has a non-public address ({address})")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(parts.scheme, parts.hostname, port, path, addresses[0])


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified
    )


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to the checked address, whatever the host name resolves to by now."""

    def __init__(self, destination: Destination, timeout: float) -> None:
        super().__init__(destination.host, destination.port, timeout=timeout)
        self._address = destination.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """The same over TLS: the certificate is verified for the URL's host name (SNI too)."""

    def __init__(self, destination: Destination, timeout: float) -> None:
        super().__init__(destination.host, destination.port, timeout=timeout, context=ssl.create_default_context())
        self._address = destination.address

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Outcome:
    """What one POST came to: the status (None if no answer), how long it took, what it answered."""

    status: int | None
    latency_ms: int
    excerpt: str
    error: str

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def _read_capped(response: http.client.HTTPResponse, *, deadline: float) -> bytes:
    """The answer's first `FAIRSCHED_WEBHOOK_RESPONSE_CAP` bytes, read a chunk at a time and no longer
    than until `deadline` (an answer dripping a byte per timeout cannot hold the sender)."""
    cap = settings.FAIRSCHED_WEBHOOK_RESPONSE_CAP
    chunks: list[bytes] = []
    size = 0
    while size < cap and time.monotonic() < deadline:
        chunk = response.read1(min(1024, cap - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def post(*, url: str, body: bytes, secret: str, idempotency_key: str, event_type: str) -> Outcome:
    """POST a signed body to `url` (the module's checks and limits); never raises for the endpoint's faults."""
    begun = time.monotonic()

    def took() -> int:
        return int((time.monotonic() - begun) * 1000)

    try:
        target = destination(url)
    except Refused as refused:
        return Outcome(None, took(), "", f"refused: {refused}"[:500])
    timeout = settings.FAIRSCHED_WEBHOOK_TIMEOUT
    connection: http.client.HTTPConnection = (
        _PinnedHTTPSConnection(target, timeout) if target.scheme == "https" else _PinnedHTTPConnection(target, timeout)
    )
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature(secret=secret, timestamp=int(time.time()), body=body),
        IDEMPOTENCY_HEADER: idempotency_key,
        EVENT_TYPE_HEADER: event_type,
    }
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        excerpt = _read_capped(response, deadline=begun + 2 * timeout)
    except (OSError, http.client.HTTPException) as failure:
        return Outcome(None, took(), "", f"{type(failure).__name__}: {failure}"[:500])
    finally:
        connection.close()
    error = (
        f"redirect to {response.getheader('Location', '')[:200]!r} not followed" if 300 <= response.status < 400 else ""
    )
    return Outcome(response.status, took(), excerpt.decode("utf-8", "replace")[:500], error)
