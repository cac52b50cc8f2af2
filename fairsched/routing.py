"""WebSocket routes; each consumer checks who may join which group."""

from django.urls import URLPattern, URLResolver, path, re_path

from charts.consumers import OrgConsumer
from common.sockets import UnknownPathConsumer
from scheduling.consumers import DashboardConsumer

websocket_urlpatterns: list[URLPattern | URLResolver] = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
    path("ws/portal/<slug:org_slug>/", OrgConsumer.as_asgi()),
    # Last: any other path is refused at the handshake, not a routing error.
    re_path(r"", UnknownPathConsumer.as_asgi()),
]
