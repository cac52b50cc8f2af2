"""WebSocket routes; each consumer checks who may join which group."""

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
