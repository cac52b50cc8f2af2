"""WebSocket routes; each consumer checks who may join which group."""

from django.urls import URLPattern, path

from charts.consumers import OrgConsumer
from scheduling.consumers import DashboardConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
    path("ws/portal/<slug:org_slug>/", OrgConsumer.as_asgi()),
]
