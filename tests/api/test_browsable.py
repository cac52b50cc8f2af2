"""The browsable API (a browser with a session) renders every page without loading anything remote."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from charts.models import Chart
from tests.conftest import Tenants


@pytest.mark.parametrize("who", ["member_a", "staff"])
def test_browsable_pages_render(tenants: Tenants, chart_a: Chart, who: str) -> None:
    client = Client()
    client.force_login(getattr(tenants, who))
    pages = ["/api/v1/", "/api/v1/charts/", f"/api/v1/charts/{chart_a.pk}/", "/api/v1/orgs/", "/api/v1/orgs/acme/"]
    if who == "staff":
        pages += ["/api/v1/scheduler/config/", "/api/v1/provider-pauses/", "/api/v1/orgs/acme/costs/"]

    for page in pages:
        response = client.get(page, HTTP_ACCEPT="text/html")
        assert response.status_code == 200, page
        assets = re.findall(r'<(?:script|link)[^>]*(?:src|href)="([^"]+)"', response.content.decode())
        assert assets, page
        assert all(asset.startswith("/static/") for asset in assets), (page, assets)
