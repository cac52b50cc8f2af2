"""The dashboard's at-risk panel: the unfinished charts at risk of missing their due time or past it,
earliest due first, with the counts per org (`scheduling.selectors.at_risk`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from charts.models import ChartState
from scheduling import selectors
from tests.conftest import Tenants
from tests.factories import ChartFactory

HOUR = timedelta(hours=1)


def test_the_panel_lists_at_risk_and_late_charts_by_due_time_with_counts_per_org(
    tenants: Tenants, django_assert_num_queries: Any
) -> None:
    now = timezone.now()

    def chart(org: Any, name: str, **fields: Any) -> Any:
        return ChartFactory(org=org, workflow=tenants.workflow, external_id=name, **fields)

    chart(tenants.org_a, "a-risky", due_at=now + 2 * HOUR, late_chance=0.7, position=0)
    chart(tenants.org_b, "b-risky", state=ChartState.RUNNING, due_at=now + HOUR, late_chance=0.55, position=1)
    chart(tenants.org_a, "a-late", due_at=now - HOUR, late_chance=0.99, position=2)
    chart(tenants.org_a, "a-fine", due_at=now + HOUR, late_chance=0.2, position=3)
    chart(tenants.org_b, "b-open", position=4)
    chart(tenants.org_b, "b-done-late", state=ChartState.SUCCEEDED, due_at=now - 2 * HOUR, finished_at=now - HOUR)

    with django_assert_num_queries(2):
        panel = selectors.at_risk(now=now)

    assert [(r["external_id"], r["verdict"], r["late_chance"]) for r in panel["rows"]] == [
        ("a-late", "late", 0.99),
        ("b-risky", "at risk", 0.55),
        ("a-risky", "at risk", 0.7),
    ]
    assert panel["orgs"] == [{"org": "acme", "at_risk": 1, "late": 1}, {"org": "beta", "at_risk": 1, "late": 0}]
    assert (panel["at_risk"], panel["late"]) == (2, 1)
    assert len(selectors.at_risk(now=now, limit=1)["rows"]) == 1


def test_the_partial_shows_the_chance_in_percent(tenants: Tenants, staff_client: Client) -> None:
    ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        external_id="a-risky",
        due_at=timezone.now() + HOUR,
        late_chance=0.734,
        position=0,
    )
    html = staff_client.get("/dashboard/partials/?names=at_risk").content.decode()

    assert 'id="at-risk"' in html
    assert "a-risky" in html
    assert "73%" in html
    assert '<span class="badge at-risk">at risk</span>' in html


def test_an_empty_panel_says_so(tenants: Tenants, staff_client: Client) -> None:
    html = staff_client.get("/dashboard/").content.decode()

    assert "No chart is at risk of missing its due time, and none is late." in html
