"""The customer portal, mounted at /portal/."""

from django.urls import path

from charts import views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("<slug:org_slug>/", views.org_charts, name="org"),
    path("<slug:org_slug>/table/", views.org_charts_table, name="org-table"),
    path("<slug:org_slug>/submit/", views.submit_one, name="submit"),
    path("<slug:org_slug>/upload/", views.submit_file, name="upload"),
    path("<slug:org_slug>/charts/<int:chart_id>/", views.chart_detail, name="chart"),
    path("<slug:org_slug>/charts/<int:chart_id>/part/", views.chart_part, name="chart-part"),
    path("<slug:org_slug>/charts/<int:chart_id>/pause/", views.chart_lever, {"lever": "pause"}, name="pause"),
    path("<slug:org_slug>/charts/<int:chart_id>/resume/", views.chart_lever, {"lever": "resume"}, name="resume"),
    path("<slug:org_slug>/charts/<int:chart_id>/cancel/", views.chart_lever, {"lever": "cancel"}, name="cancel"),
]
