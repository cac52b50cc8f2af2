"""The ASGI scope of one HTTP request, for benches that drive the application in process."""

from __future__ import annotations

from typing import Any


def http_scope(method: str, path: str, token: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    """A request to `path` from a client on 127.0.0.1, authorised by an API token, accepting JSON."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Token {token}".encode()),
            (b"accept", b"application/json"),
            *headers,
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
