"""The customer status portal, mounted at /portal/."""

from django.urls import path

from charts import views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("<slug:org_slug>/", views.org_charts, name="org"),
    path("<slug:org_slug>/table/", views.org_charts_table, name="org-table"),
    path("<slug:org_slug>/charts/<int:chart_id>/", views.chart_detail, name="chart"),
]
