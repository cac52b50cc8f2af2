"""WebSocket routes; each consumer checks who may join which group."""

from django.urls import URLPattern, path

from scheduling.consumers import DashboardConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
]
