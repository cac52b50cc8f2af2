"""The dashboard's URLs, mounted at /dashboard/: the page and its reads (levers are /api/v1/)."""

from django.urls import path

from scheduling import views

app_name = "dashboard"

urlpatterns = [
    path("", views.dashboard, name="index"),
    path("partials/", views.partials, name="partials"),
    path("samples/", views.samples, name="samples"),
    path("queue/", views.queue, name="queue"),
]
