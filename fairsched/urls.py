"""URL map: admin, portal, dashboard, REST API, metrics."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from scheduling.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", RedirectView.as_view(url="/portal/", permanent=False)),
    path("portal/", include("charts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("fairsched.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("metrics", metrics_view, name="metrics"),
    path("dashboard/", include("scheduling.urls")),
]
