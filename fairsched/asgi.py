"""ASGI entry point: Django for HTTP (its WSGI handler in a thread pool: fairsched/wsgi_bridge.py; `/healthz`
on the event loop, however busy the pool), Channels for WebSockets (authenticated, origin-checked)."""

import os

from fairsched.wsgi_bridge import BridgedWSGIHandler, WSGIBridge

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fairsched.settings")


def _http_application() -> WSGIBridge:
    """Django's HTTP application, with the URLconf and every view it names loaded now: lazily, a worker's
    first request paid for importing them (DRF, the schema, the apps' views), in the latency of
    whichever requests reach a new worker first (bench/bench_api.py)."""
    import django
    from django.conf import settings
    from django.urls import get_resolver

    django.setup(set_prefix=False)
    bridge = WSGIBridge(BridgedWSGIHandler(), threads=settings.WEB_THREADS)
    get_resolver().url_patterns  # noqa: B018 (loaded for its imports)
    return bridge


django_asgi_app = _http_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from fairsched.health import LivenessOnTheLoop  # noqa: E402
from fairsched.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": LivenessOnTheLoop(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
