"""Plain HTTP under ASGI served by Django's WSGI handler, each request whole in one thread of a pool.

Django's ASGI handler runs a sync project's request in hops between the event loop and threads (the
stack, the view, asgiref's per-request ThreadSensitiveContext and its fresh thread), a large share of
a status read's CPU (bench/bench_http_cpu.py). Here the event loop reads the request's head and
first body message, hands the request to a pool thread once, and sends the answer when the thread is
done: one hop, as gunicorn's threaded worker would. What that keeps:

- Connections. `request_started` and `request_finished` (and with them `close_old_connections`) run on
  the thread that serves the request, so database connections behave as under WSGI: given back to the
  pool (or closed) when the request ends.
- Concurrency. The pool has `WEB_THREADS` threads (`FAIRSCHED_WEB_THREADS`, default 8, at most the
  database pool's size): a slow request holds one of them, not the process (asgiref's thread-sensitive
  mode would have queued every request of the process behind it).
- Bodies are read as the application reads them: the thread asks the event loop for the next message
  only when it needs more bytes, so a body past `DATA_UPLOAD_MAX_MEMORY_SIZE` is refused (413, as
  before) having received at most about the limit, never the whole body (Django's ASGI handler
  spooled all of it first). A body without a length (chunked) is the request's stream to its end, as
  under ASGI, for `RequestGuardMiddleware` to read within the limit.
- Streaming responses (and static files) are sent from the thread in batches of up to 64 KiB; a
  client that disconnects stops the iteration, and the response is closed on its thread.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.handlers.wsgi import WSGIHandler, WSGIRequest
from django.http import HttpResponseBase, UnreadablePostError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Coroutine[Any, Any, Message]]
Send = Callable[[Message], Coroutine[Any, Any, None]]

STREAM_BATCH_BYTES = 64 * 1024


class ClientGone(Exception):
    """The client closed its connection while a streaming answer was being sent."""


class RequestBody:
    """`wsgi.input`: the request body, pulled from the connection (one hop each) as it is read."""

    def __init__(self, first: Message, receive: Receive, loop: asyncio.AbstractEventLoop) -> None:
        self._receive = receive
        self._loop = loop
        self._buffer = bytearray()
        self._more = True
        self._take(first)

    @property
    def complete(self) -> bool:
        """Every message of the body has been received (so the next one is the disconnect)."""
        return not self._more

    def _take(self, message: Message) -> None:
        if message["type"] == "http.disconnect":
            self._more = False
            raise UnreadablePostError("the client disconnected before sending its whole body")
        self._buffer += message.get("body", b"")
        self._more = message.get("more_body", False)

    def _pull(self) -> None:
        self._take(asyncio.run_coroutine_threadsafe(self._receive(), self._loop).result())

    def _cut(self, end: int) -> bytes:
        data = bytes(self._buffer[:end])
        del self._buffer[:end]
        return data

    def read(self, size: int = -1) -> bytes:
        while self._more and (size < 0 or len(self._buffer) < size):
            self._pull()
        return self._cut(len(self._buffer) if size < 0 else size)

    def readline(self, size: int = -1) -> bytes:
        while self._more and b"\n" not in self._buffer and (size < 0 or len(self._buffer) < size):
            self._pull()
        end = self._buffer.find(b"\n") + 1 or len(self._buffer)
        return self._cut(end if size < 0 else min(end, size))

    def close(self) -> None:
        """Django closes a body it has read; what is left unread stays with the connection."""


class BridgedRequest(WSGIRequest):
    """A WSGI request whose body without a declared length is read to its end (WSGI's would be empty)."""

    def __init__(self, environ: dict[str, Any]) -> None:
        super().__init__(environ)
        if "CONTENT_LENGTH" not in environ:
            self._stream = environ["wsgi.input"]


class BridgedWSGIHandler(WSGIHandler):
    request_class = BridgedRequest


def environ_for(scope: Scope, body: RequestBody) -> dict[str, Any]:
    """The WSGI environ of an ASGI HTTP scope (PEP 3333; as asgiref's WsgiToAsgi builds it)."""
    path = scope["path"]
    root_path = scope.get("root_path", "")
    if root_path and path.startswith(root_path):
        path = path[len(root_path) :]
    server = scope.get("server") or ("localhost", 80)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root_path.encode("utf8").decode("latin1"),
        "PATH_INFO": path.encode("utf8").decode("latin1"),
        "QUERY_STRING": scope["query_string"].decode("ascii"),
        "SERVER_PROTOCOL": f"HTTP/{scope['http_version']}",
        "SERVER_NAME": server[0],
        "SERVER_PORT": str(server[1] or 80),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    if scope.get("client"):
        environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = scope["client"][0], str(scope["client"][1])
    for raw_name, raw_value in scope["headers"]:
        if b"_" in raw_name:
            continue  # as Django's ASGI handler and gunicorn: `X_User` must not pass for `X-User`
        name = raw_name.decode("latin1").upper().replace("-", "_")
        value = raw_value.decode("latin1")
        key = name if name in ("CONTENT_LENGTH", "CONTENT_TYPE") else f"HTTP_{name}"
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


class WSGIBridge:
    """The ASGI HTTP application: Django's WSGI handler, each request run whole in a pool thread.

    1. In the event loop: receive the first body message (a request without a body is then complete).
    2. In a pool thread: run the handler (request_started, middleware, view); a plain answer is joined
       and closed there (request_finished); a streaming one is sent from the thread as it iterates.
    3. In the event loop: send a plain answer's head and body.
    """

    def __init__(self, handler: WSGIHandler, *, threads: int) -> None:
        self.handler = handler
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="http")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"the WSGI bridge serves HTTP only, not {scope['type']!r}")
        loop = asyncio.get_running_loop()
        body = RequestBody(await receive(), receive, loop)
        answer = await loop.run_in_executor(self.pool, self._serve, scope, body, receive, send, loop)
        if answer is not None:
            start, content = answer
            await send(start)
            await send({"type": "http.response.body", "body": content})

    def _serve(
        self, scope: Scope, body: RequestBody, receive: Receive, send: Send, loop: asyncio.AbstractEventLoop
    ) -> tuple[Message, bytes] | None:
        """Run in a pool thread: the answer's head and body, or None when it was streamed from here."""
        head: list[Message] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None, /
        ) -> Callable[[bytes], Any]:
            head.append(
                {
                    "type": "http.response.start",
                    "status": int(status[:3]),
                    "headers": [(name.lower().encode("latin1"), value.encode("latin1")) for name, value in headers],
                }
            )
            return unsupported_write

        response: HttpResponseBase = self.handler(environ_for(scope, body), start_response)
        try:
            if not response.streaming:
                return head[0], response.content  # type: ignore[attr-defined]
            self._stream(head[0], response, body, receive, send, loop)
            return None
        finally:
            response.close()

    def _stream(
        self,
        start: Message,
        chunks: Iterable[bytes],
        body: RequestBody,
        receive: Receive,
        send: Send,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        gone = threading.Event()

        async def watch() -> None:
            if (await receive())["type"] == "http.disconnect":
                gone.set()

        async def begin() -> asyncio.Task[None] | None:
            await send(start)
            return loop.create_task(watch()) if body.complete else None

        async def send_part(data: bytes, more: bool) -> None:
            if gone.is_set():
                raise ClientGone
            await send({"type": "http.response.body", "body": data, "more_body": more})

        watcher = asyncio.run_coroutine_threadsafe(begin(), loop).result()
        try:
            for batch in batched(chunks, STREAM_BATCH_BYTES):
                asyncio.run_coroutine_threadsafe(send_part(batch, True), loop).result()
            asyncio.run_coroutine_threadsafe(send_part(b"", False), loop).result()
        except ClientGone:
            pass
        finally:
            if watcher is not None:
                loop.call_soon_threadsafe(watcher.cancel)


def unsupported_write(data: bytes) -> None:
    raise NotImplementedError("WSGI's write() is not offered: Django answers with its response's iterable")


def batched(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The chunks joined into pieces of at least `size` bytes (the last may be shorter), so a file
    read in 8 KiB blocks is not a hop per block."""
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        if len(pending) >= size:
            yield bytes(pending)
            pending.clear()
    if pending:
        yield bytes(pending)
