"""The dashboard's URLs, mounted at /dashboard/."""

from django.urls import path

from scheduling import views

app_name = "dashboard"

urlpatterns = [
    path("", views.dashboard, name="index"),
    path("state/", views.state, name="state"),
    path("queue/", views.queue, name="queue"),
    path("what-if/", views.what_if, name="what-if"),
    path("levers/budget/", views.budget, name="budget"),
    path("levers/policy/", views.policy, name="policy"),
    path("levers/orgs/<slug:slug>/hold/", views.org_hold, name="org-hold"),
    path("levers/orgs/<slug:slug>/release/", views.org_release, name="org-release"),
    path("levers/orgs/<slug:slug>/weight/", views.org_weight, name="org-weight"),
    path("levers/orgs/<slug:slug>/cap/", views.org_cap, name="org-cap"),
    path("levers/orgs/<slug:slug>/queue-limit/", views.org_queue_limit, name="org-queue-limit"),
    path("levers/orgs/<slug:slug>/cost/", views.org_cost, name="org-cost"),
    path("levers/charts/<int:pk>/pause/", views.chart_pause, name="chart-pause"),
    path("levers/charts/<int:pk>/resume/", views.chart_resume, name="chart-resume"),
    path("levers/charts/<int:pk>/priority/", views.chart_priority, name="chart-priority"),
    path("levers/charts/<int:pk>/top/", views.chart_top, name="chart-top"),
    path("levers/charts/<int:pk>/cancel/", views.chart_cancel, name="chart-cancel"),
    path("levers/providers/<slug:slug>/pause/", views.provider_pause, name="provider-pause"),
    path("levers/providers/<slug:slug>/resume/", views.provider_resume, name="provider-resume"),
]
