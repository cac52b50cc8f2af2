"""ASGI entry point: Django for HTTP, Channels for WebSockets (authenticated, origin-checked)."""

import os

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler, running the whole middleware stack and the view in one thread hop.

    Django's own handler builds the stack in async mode: every `MiddlewareMixin` middleware (security,
    sessions, CSRF, auth, messages, clickjacking, CSP) then runs its `process_request` and
    `process_response` each in a hop of its own to the sync thread, and the stack's sync-only parts
    hop back to the event loop in between: some fifteen hops a request, each a handover between the
    loop and the thread, which cost more than the API's own work (profiled in bench/bench_api.py).
    Every view and middleware here is sync, so the stack is built in sync mode and called once in the
    sync thread (thread-sensitive, as Django's sync views run under ASGI: the database connection
    stays with its thread); the event loop keeps reading and writing the sockets.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


def _http_application() -> ASGIHandler:
    """Django's HTTP application, with the URLconf and every view it names loaded now: lazily, a worker's
    first request paid for importing them (DRF, the schema, the apps' views: ~0.3 s of CPU, in the
    latency of whichever requests reach a new worker first; bench/bench_api.py)."""
    import django
    from django.urls import get_resolver

    django.setup(set_prefix=False)
    handler = OneHopASGIHandler()
    get_resolver().url_patterns  # noqa: B018 (loaded for its imports)
    return handler


django_asgi_app = _http_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from fairsched.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
