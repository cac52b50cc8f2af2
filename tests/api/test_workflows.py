"""Workflow endpoints: anyone signed in reads the catalogue; only staff set a workflow's run timeout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from common.actors import Actor
from orgs.models import Org, Workflow
from orgs.services import RUN_TIMEOUT, workflow_cost_set
from scheduling.reconcile import duration_record
from tests.conftest import Tenants
from tests.factories import MembershipFactory, ProviderFactory, WorkflowFactory

Client = Callable[[Any], APIClient]


def test_members_and_staff_read_workflows_with_their_run_timeout(
    tenants: Tenants, client_for: Client, settings: Any
) -> None:
    settings.FAIRSCHED_RUN_TIMEOUT = 7200
    WorkflowFactory(name="export", default_cost=3, run_timeout=600, provider=ProviderFactory(slug="geo-api"))

    settings.FAIRSCHED_DEFAULT_DURATION = 45.0
    for user, org in ((tenants.member_a, "acme"), (tenants.staff, None)):
        body = client_for(user).get("/api/v1/workflows/").json()
        assert body["results"] == [
            {
                "name": "export",
                "default_cost": 3,
                "provider": "geo-api",
                "run_timeout": 600,
                "effective_run_timeout": 600,
                "org": org,
                "cost": 3,
                "initial_duration": None,
                "expected_duration": 45.0,
            },
            {
                "name": "render",
                "default_cost": 1,
                "provider": None,
                "run_timeout": None,
                "effective_run_timeout": 7200,
                "org": org,
                "cost": 1,
                "initial_duration": None,
                "expected_duration": 45.0,
            },
        ]
    one = client_for(tenants.member_b).get("/api/v1/workflows/export/")
    assert one.status_code == 200
    assert one.json()["run_timeout"] == 600
    assert client_for(tenants.member_a).get("/api/v1/workflows/nope/").status_code == 404
    assert client_for(None).get("/api/v1/workflows/").status_code in (401, 403)


def test_staff_set_and_clear_a_run_timeout(tenants: Tenants, client_for: Client, settings: Any) -> None:
    settings.FAIRSCHED_RUN_TIMEOUT = 7200
    staff = client_for(tenants.staff)

    response = staff.patch("/api/v1/workflows/render/", {"run_timeout": 900}, format="json")
    assert response.status_code == 200
    assert (response.json()["run_timeout"], response.json()["effective_run_timeout"]) == (900, 900)
    assert Workflow.objects.get(name="render").run_timeout == 900

    response = staff.patch("/api/v1/workflows/render/", {"run_timeout": None}, format="json")
    assert (response.json()["run_timeout"], response.json()["effective_run_timeout"]) == (None, 7200)
    assert Workflow.objects.get(name="render").run_timeout is None


@pytest.mark.parametrize("who", ["member_a", "outsider"])
def test_only_staff_set_run_timeouts(tenants: Tenants, client_for: Client, who: str) -> None:
    response = client_for(getattr(tenants, who)).patch("/api/v1/workflows/render/", {"run_timeout": 5}, format="json")
    assert response.status_code == 403
    assert Workflow.objects.get(name="render").run_timeout is None


@pytest.mark.parametrize("value", [0, -5, 1.5, "soon", True, RUN_TIMEOUT.maximum + 1])
def test_a_bad_run_timeout_is_400_naming_the_field(tenants: Tenants, client_for: Client, value: Any) -> None:
    response = client_for(tenants.staff).patch("/api/v1/workflows/render/", {"run_timeout": value}, format="json")
    assert response.status_code == 400
    assert "run_timeout" in response.json()
    assert Workflow.objects.get(name="render").run_timeout is None


def test_staff_state_a_new_workflow_s_initial_duration_which_its_etas_use_until_runs_are_learned(
    tenants: Tenants, client_for: Client, settings: Any
) -> None:
    settings.FAIRSCHED_DEFAULT_DURATION = 60.0
    staff = client_for(tenants.staff)
    created = staff.post(
        "/api/v1/workflows/",
        {"name": "scan", "workflow_type": "Scan", "task_queue": "q", "initial_duration": 8},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["initial_duration"] == 8
    read = client_for(tenants.member_a).get("/api/v1/workflows/scan/").json()
    assert (read["initial_duration"], read["expected_duration"]) == (8, 8.0)

    assert staff.patch("/api/v1/workflows/scan/", {"initial_duration": None}, format="json").status_code == 200
    assert client_for(tenants.member_a).get("/api/v1/workflows/scan/").json()["expected_duration"] == 60.0


@pytest.mark.parametrize("value", [0, -1, 2.5, "8s"])
def test_a_bad_initial_duration_is_400_naming_the_field(tenants: Tenants, client_for: Client, value: Any) -> None:
    response = client_for(tenants.staff).patch("/api/v1/workflows/render/", {"initial_duration": value}, format="json")
    assert response.status_code == 400
    assert "initial_duration" in response.json()
    assert Workflow.objects.get(name="render").initial_duration is None


def test_an_empty_change_is_400_naming_the_fields(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.staff).patch("/api/v1/workflows/render/", {}, format="json")
    assert response.status_code == 400
    assert "run_timeout" in response.json()["non_field_errors"][0]


def stat(org: Org, workflow: Workflow, *runs: float) -> None:
    for seconds in runs:
        duration_record(org_id=org.pk, workflow_id=workflow.pk, seconds=seconds)


@pytest.fixture
def export(tenants: Tenants) -> Workflow:
    """A dearer workflow with an acme override, runs of acme and beta, and no runs of render."""
    export = WorkflowFactory(name="export", default_cost=3)
    workflow_cost_set(org=tenants.org_a, workflow=export, cost=7, actor=Actor("user:stella", staff=True))
    stat(tenants.org_a, export, 100.0, 200.0)  # acme's own runs of export: mean 150
    stat(tenants.org_b, export, 30.0)  # beta's: the workflow's mean over both orgs is 110
    return export


def terms(body: dict[str, Any]) -> dict[str, tuple[str | None, int, float]]:
    return {row["name"]: (row["org"], row["cost"], row["expected_duration"]) for row in body["results"]}


def test_a_member_sees_its_orgs_cost_and_expected_duration(
    tenants: Tenants, client_for: Client, export: Workflow
) -> None:
    acme = terms(client_for(tenants.member_a).get("/api/v1/workflows/").json())
    beta = terms(client_for(tenants.member_b).get("/api/v1/workflows/").json())

    # export: acme's override and acme's runs; render: no org's runs of it, so acme's runs of anything.
    assert acme == {"export": ("acme", 7, 150.0), "render": ("acme", 1, 150.0)}
    assert beta == {"export": ("beta", 3, 30.0), "render": ("beta", 1, 30.0)}


def test_a_workflow_the_org_never_ran_is_expected_to_take_its_runs_by_other_orgs(
    tenants: Tenants, client_for: Client, export: Workflow
) -> None:
    """Acme never ran render, beta did: acme expects beta's runs of render, not its own of export."""
    stat(tenants.org_b, Workflow.objects.get(name="render"), 40.0)

    acme = terms(client_for(tenants.member_a).get("/api/v1/workflows/").json())

    assert acme == {"export": ("acme", 7, 150.0), "render": ("acme", 1, 40.0)}


def test_with_no_org_the_terms_are_the_workflows_own(
    tenants: Tenants, client_for: Client, export: Workflow, settings: Any
) -> None:
    settings.FAIRSCHED_DEFAULT_DURATION = 60.0

    staff = terms(client_for(tenants.staff).get("/api/v1/workflows/").json())

    assert staff == {"export": (None, 3, 110.0), "render": (None, 1, 60.0)}
    assert terms(client_for(tenants.staff).get("/api/v1/workflows/?org=acme").json())["export"] == ("acme", 7, 150.0)


def test_a_member_of_several_orgs_names_one(tenants: Tenants, client_for: Client, export: Workflow) -> None:
    MembershipFactory(user=tenants.member_a, org=tenants.org_b)
    client = client_for(tenants.member_a)

    assert terms(client.get("/api/v1/workflows/").json())["export"] == (None, 3, 110.0)
    assert terms(client.get("/api/v1/workflows/?org=beta").json())["export"] == ("beta", 3, 30.0)
    one = client.get("/api/v1/workflows/export/?org=acme").json()
    assert (one["org"], one["cost"], one["expected_duration"]) == ("acme", 7, 150.0)


@pytest.mark.parametrize("slug", ["beta", "nowhere", "bad slug!"])
def test_naming_an_org_that_is_not_the_callers_is_400(
    tenants: Tenants, client_for: Client, export: Workflow, slug: str
) -> None:
    for path in ("/api/v1/workflows/", "/api/v1/workflows/export/"):
        response = client_for(tenants.member_a).get(path, {"org": slug})
        assert response.status_code == 400
        assert "org" in response.json()
        assert "7" not in response.content.decode()


def test_an_org_token_sees_its_orgs_terms(
    token_client: Callable[[str], APIClient], org_token: str, export: Workflow
) -> None:
    body = token_client(org_token).get("/api/v1/workflows/export/").json()

    assert (body["org"], body["cost"], body["expected_duration"]) == ("acme", 7, 150.0)


def test_the_list_costs_a_fixed_number_of_queries(
    tenants: Tenants, client_for: Client, export: Workflow, django_assert_num_queries: Any
) -> None:
    for i in range(20):
        workflow = WorkflowFactory(name=f"w{i:02}", provider=ProviderFactory())
        workflow_cost_set(org=tenants.org_a, workflow=workflow, cost=2, actor=Actor("user:stella", staff=True))
        stat(tenants.org_b, workflow, 10.0)
    client = client_for(tenants.member_a)

    # session, user, scope, the org, workflows page (with providers), overrides, duration statistics
    with django_assert_num_queries(7):
        body = client.get("/api/v1/workflows/?page_size=10").json()
    assert len(body["results"]) == 10
    assert list(terms(body).items())[:3] == [
        ("export", ("acme", 7, 150.0)),
        ("render", ("acme", 1, 150.0)),
        ("w00", ("acme", 2, 10.0)),  # beta's runs of w00 come before acme's runs of anything
    ]


def test_the_schema_shows_the_terms(tenants: Tenants, client_for: Client) -> None:
    schema = client_for(tenants.member_a).get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/workflows/"]["get"]
    assert "org" in {p["name"] for p in operation["parameters"]}
    page = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    item = schema["components"]["schemas"][page]["properties"]["results"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert {"name", "org", "cost", "expected_duration"} <= set(schema["components"]["schemas"][item]["properties"])


@pytest.mark.parametrize("url", ["/api/v1/workflows/", "/api/v1/providers/"])
def test_workflow_and_provider_queries_are_strict(tenants: Tenants, client_for: Client, url: str) -> None:
    client = client_for(tenants.member_a)

    unknown = client.get(f"{url}?colour=red")

    assert (unknown.status_code, unknown.json()) == (400, {"colour": ["unknown query parameter"]})
    assert client.get(f"{url}?page_size=5").status_code == 200


def test_workflows_org_is_given_once(tenants: Tenants, client_for: Client) -> None:
    repeated = client_for(tenants.staff).get("/api/v1/workflows/?org=acme&org=beta")

    assert (repeated.status_code, list(repeated.json())) == (400, ["org"])
