"""URL map: admin, portal, dashboard, REST API, metrics."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from fairsched.middleware import api_bad_request, api_not_found
from scheduling.metrics import metrics_view

# Under /api/ an unknown URL (a malformed id, say) answers JSON like every other API error.
handler404 = api_not_found
handler400 = api_bad_request

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", RedirectView.as_view(url="/portal/", permanent=False)),
    path("portal/<slug:org_slug>/webhooks/", include("feed.urls")),
    path("portal/", include("charts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", include("fairsched.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file: the CSP lets no inline script run.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("metrics", metrics_view, name="metrics"),
    path("dashboard/", include("scheduling.urls")),
]
