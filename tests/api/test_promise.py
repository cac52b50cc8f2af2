"""The turnaround promise in the API: `due_at`, `late_chance`, `at_risk` and `late` on every chart
read, and the charts list's `at_risk` and `late` filters."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from charts.models import Chart, ChartState
from tests.conftest import Tenants
from tests.factories import ChartFactory

HOUR = timedelta(hours=1)


@pytest.fixture
def promised(tenants: Tenants) -> dict[str, Chart]:
    """Acme: one chart at risk, one late, one on track, one without a promise; Beta: one at risk."""
    now = timezone.now()

    def chart(org: Any, name: str, **fields: Any) -> Chart:
        return ChartFactory(org=org, workflow=tenants.workflow, external_id=name, **fields)

    return {
        "risky": chart(tenants.org_a, "risky", due_at=now + HOUR, late_chance=0.75, position=0),
        "late": chart(tenants.org_a, "late", state=ChartState.RUNNING, due_at=now - HOUR, late_chance=1.0, position=1),
        "fine": chart(tenants.org_a, "fine", due_at=now + 2 * HOUR, late_chance=0.1, position=2),
        "open": chart(tenants.org_a, "open", position=3),
        "beta": chart(tenants.org_b, "beta-risky", due_at=now + HOUR, late_chance=0.9, position=4),
    }


def _ids(response: Any) -> set[str]:
    assert response.status_code == 200, response.json()
    return {chart["external_id"] for chart in response.json()["results"]}


def test_every_chart_read_carries_the_promise(
    tenants: Tenants, client_for: Any, token_client: Any, org_token: str, promised: dict[str, Chart]
) -> None:
    risky = promised["risky"]
    listed = {c["external_id"]: c for c in client_for(tenants.member_a).get("/api/v1/charts/").json()["results"]}
    detail = client_for(tenants.member_a).get(f"/api/v1/charts/{risky.pk}/").json()
    status_read = token_client(org_token).get(f"/api/v1/charts/{risky.pk}/").json()
    for body in (listed["risky"], detail, status_read):
        assert body["due_at"] == risky.due_at.isoformat().replace("+00:00", "Z")  # type: ignore[union-attr]
        assert (body["late_chance"], body["at_risk"], body["late"]) == (0.75, True, False)
    assert (listed["late"]["at_risk"], listed["late"]["late"]) == (False, True)
    assert (listed["fine"]["at_risk"], listed["fine"]["late"]) == (False, False)
    assert (listed["open"]["due_at"], listed["open"]["late_chance"], listed["open"]["at_risk"]) == (None, None, False)


def test_the_list_filters_by_at_risk_and_late(tenants: Tenants, client_for: Any, promised: dict[str, Chart]) -> None:
    client = client_for(tenants.member_a)
    assert _ids(client.get("/api/v1/charts/?at_risk=true")) == {"risky"}
    assert _ids(client.get("/api/v1/charts/?at_risk=false")) == {"late", "fine", "open"}
    assert _ids(client.get("/api/v1/charts/?late=true")) == {"late"}
    assert _ids(client.get("/api/v1/charts/?late=false&at_risk=false")) == {"fine", "open"}
    assert _ids(client.get("/api/v1/charts/?late=true&state=queued")) == set()


def test_a_tenant_sees_only_its_own_charts_at_risk(
    tenants: Tenants, client_for: Any, token_client: Any, org_token: str, promised: dict[str, Chart]
) -> None:
    assert _ids(client_for(tenants.member_b).get("/api/v1/charts/?at_risk=true")) == {"beta-risky"}
    assert _ids(token_client(org_token).get("/api/v1/charts/?at_risk=true")) == {"risky"}
    assert _ids(client_for(tenants.staff).get("/api/v1/charts/?at_risk=true")) == {"risky", "beta-risky"}
    assert _ids(client_for(tenants.member_a).get("/api/v1/charts/?at_risk=true&org=beta")) == set()


@pytest.mark.parametrize("query", ["at_risk=1", "at_risk=True", "at_risk=", "late=yes", "late=0"])
def test_a_filter_that_is_not_true_or_false_is_a_400_naming_it(tenants: Tenants, client_for: Any, query: str) -> None:
    response = client_for(tenants.member_a).get(f"/api/v1/charts/?{query}")

    assert response.status_code == 400
    assert set(response.json()) == {query.split("=")[0]}


def test_both_bad_filters_are_named_in_one_answer(tenants: Tenants, client_for: Any) -> None:
    response = client_for(tenants.member_a).get("/api/v1/charts/?at_risk=maybe&late=1")

    assert response.status_code == 400
    assert set(response.json()) == {"at_risk", "late"}


def test_the_filtered_list_is_still_two_statements(
    tenants: Tenants, token_client: Any, org_token: str, promised: dict[str, Chart], django_assert_num_queries: Any
) -> None:
    client = token_client(org_token)
    client.get("/api/v1/charts/")  # the first use records last_used_at
    with django_assert_num_queries(2):  # the token with its scope, then the page (the threshold inside it)
        assert _ids(client.get("/api/v1/charts/?at_risk=true&late=false")) == {"risky"}


def test_the_schema_documents_the_fields_and_filters(client_for: Any, tenants: Tenants) -> None:
    schema = client_for(tenants.staff).get("/api/schema/?format=json").json()
    chart = schema["components"]["schemas"]["Chart"]["properties"]
    assert {"due_at", "late_chance", "at_risk", "late"} <= set(chart)
    assert chart["at_risk"]["type"] == "boolean"
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/charts/"]["get"]["parameters"]}
    assert parameters["at_risk"]["schema"]["type"] == "boolean"
    assert parameters["late"]["schema"]["type"] == "boolean"


def test_a_replan_makes_a_chart_due_too_soon_at_risk(tenants: Tenants, client_for: Any) -> None:
    """End to end: the replan writes each chart's late_chance (`scheduling.replan`), and the API reads
    a chart due long before its ETA as at risk, one due long after as not."""
    from scheduling.replan import plan_refresh

    now = timezone.now()
    for name, due in (("tight", now + timedelta(seconds=30)), ("roomy", now + timedelta(days=30))):
        ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id=name, due_at=due)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="running", state=ChartState.RUNNING, cost=1)
    ChartFactory.create_batch(30, org=tenants.org_a, workflow=tenants.workflow)
    plan_refresh()

    listed = {
        c["external_id"]: c for c in client_for(tenants.member_a).get("/api/v1/charts/?page_size=100").json()["results"]
    }
    assert listed["tight"]["late_chance"] > 0.5
    assert listed["tight"]["at_risk"] is True
    assert listed["roomy"]["late_chance"] < 0.5
    assert listed["roomy"]["at_risk"] is False
    assert _ids(client_for(tenants.member_a).get("/api/v1/charts/?at_risk=true")) == {"tight"}
