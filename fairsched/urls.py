"""URL map: admin, portal, dashboard, REST API, metrics."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("dashboard/", include("scheduling.urls")),
]
