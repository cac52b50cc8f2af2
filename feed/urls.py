"""The portal's webhook pages, mounted at /portal/<org>/webhooks/."""

from django.urls import path

from feed import views

app_name = "portal-webhooks"

urlpatterns = [
    path("", views.webhooks, name="list"),
    path("register/", views.register, name="register"),
    path("<int:endpoint_id>/", views.endpoint_log, name="log"),
    path("<int:endpoint_id>/enable/", views.enable, name="enable"),
    path("<int:endpoint_id>/deliveries/<int:delivery_id>/send-again/", views.send_again, name="send-again"),
]
