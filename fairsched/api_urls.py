"""The REST API's routes, mounted under /api/v1/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from charts.api import ChartViewSet
from charts.org_api import OrgViewSet
from orgs.api import ApiTokenViewSet, ProviderViewSet
from scheduling.api import PlanPreviewView, ProviderPauseViewSet, SchedulerConfigView
from scheduling.workflow_api import WorkflowViewSet

router = DefaultRouter()
router.register("charts", ChartViewSet, basename="chart")
router.register("orgs", OrgViewSet, basename="org")
router.register("workflows", WorkflowViewSet, basename="workflow")
router.register("providers", ProviderViewSet, basename="provider")
router.register("provider-pauses", ProviderPauseViewSet, basename="provider-pause")
router.register("tokens", ApiTokenViewSet, basename="token")

urlpatterns = [
    path("scheduler/config/", SchedulerConfigView.as_view(), name="scheduler-config"),
    path("scheduler/plan-preview/", PlanPreviewView.as_view(), name="plan-preview"),
    *router.urls,
]
