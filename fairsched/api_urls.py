"""The REST API's routes, mounted under /api/v1/."""

from django.urls import URLPattern, path, re_path
from rest_framework.routers import DefaultRouter

from charts.api import ChartViewSet
from charts.selectors import org_summary
from charts.serializers import OrgDetailSerializer
from charts.status_api import chart_status_view
from feed.api import EventFeedView, WebhookEndpointViewSet
from knobs.api import SchedulerConfigHistoryView, SchedulerConfigView
from orgs.api import ApiTokenViewSet, ProviderPauseViewSet, ProviderViewSet, ViewerZoneView
from orgs.org_api import OrgViewSet
from orgs.workflow_api import WorkflowViewSet
from scheduling.api import PlanPreviewView, RescueView
from scheduling.selectors import workflow_terms

router = DefaultRouter()
router.register("charts", ChartViewSet, basename="chart")
# The org and workflow APIs are orgs', and their answers count charts and price runs: what the apps above
# orgs compute is given to them here, so that orgs imports none of them.
router.register(
    "orgs", OrgViewSet.wired(org_summary=org_summary, detail_serializer=OrgDetailSerializer), basename="org"
)
router.register("workflows", WorkflowViewSet.wired(workflow_terms=workflow_terms), basename="workflow")
router.register("providers", ProviderViewSet, basename="provider")
router.register("provider-pauses", ProviderPauseViewSet, basename="provider-pause")
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("webhooks", WebhookEndpointViewSet, basename="webhook")

# The chart status read, the API's most frequent call, answered without DRF's generic machinery when it
# can be (the same checks and the same response; `charts/status_api.py`), else by the viewset's route.
chart_detail = next(
    pattern
    for pattern in router.urls
    if isinstance(pattern, URLPattern)
    and pattern.name == "chart-detail"
    and "format" not in pattern.pattern.regex.groupindex
)

urlpatterns = [
    re_path(chart_detail.pattern.regex.pattern, chart_status_view(chart_detail.callback), name="chart-status"),
    path("scheduler/config/", SchedulerConfigView.as_view(), name="scheduler-config"),
    path("scheduler/config/history/", SchedulerConfigHistoryView.as_view(), name="scheduler-config-history"),
    path("scheduler/plan-preview/", PlanPreviewView.as_view(), name="plan-preview"),
    path("scheduler/rescue/", RescueView.as_view(), name="scheduler-rescue"),
    path("events/", EventFeedView.as_view(), name="events"),
    path("me/zone/", ViewerZoneView.as_view(), name="viewer-zone"),
    *router.urls,
]
