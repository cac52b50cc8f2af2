"""The OpenAPI schema and its docs page; Schemathesis checks every operation against the schema."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.test import APIClient
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from common.api import api_exception_handler
from common.errors import Conflict, QueueFull
from orgs.access import api_token_issue
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

# Ten examples per operation (positive and negative drawn together) keep this file within a minute or
# so; FAIRSCHED_SCHEMA_EXAMPLES raises it for a deep run, and FAIRSCHED_SCHEMA_SEED=random draws new
# examples on each run (by default the same every run, so that a failure reproduces).
EXAMPLES_PER_OPERATION = int(os.environ.get("FAIRSCHED_SCHEMA_EXAMPLES", "10"))
DERANDOMIZE = os.environ.get("FAIRSCHED_SCHEMA_SEED") != "random"


@pytest.fixture(scope="module")
def schema(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    """The schema as served, generated once for the module's readers: it follows from the code
    (views, serializers, settings), not from the rows, and a reader only reads it."""
    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    served: dict[str, Any] = response.json()
    return served


@pytest.fixture
def wsgi_app() -> Iterator[Any]:
    """The real WSGI application, keeping the test's database connection open between requests
    (as Django's test client does): each request would otherwise close it."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_schema_is_served(tenants: Tenants) -> None:
    response = APIClient().get("/api/schema/?format=json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/charts/bulk/" in paths
    assert "/api/v1/scheduler/plan-preview/" in paths
    assert {"post"} <= paths["/api/v1/workflows/"].keys()
    assert {"post"} <= paths["/api/v1/orgs/"].keys()
    assert {"get", "post"} <= paths["/api/v1/orgs/{slug}/members/"].keys()
    assert {"get", "post"} <= paths["/api/v1/tokens/"].keys()
    assert {"delete"} <= paths["/api/v1/tokens/{id}/"].keys()


def test_every_operation_documents_its_errors(schema: dict[str, Any]) -> None:
    operations = [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]

    assert len(operations) >= 20
    for path, method, operation in operations:
        codes = set(operation["responses"])
        assert {"400", "401", "403", "404", "429"} <= codes, (method, path, codes)
        if method != "get":
            assert "409" in codes, (method, path)
        if method in {"post", "put", "patch"}:
            assert {"413", "415"} <= codes, (method, path)
        assert "Retry-After" in operation["responses"]["429"]["headers"]
    prioritize = schema["components"]["schemas"]["PrioritizeRequest"]
    assert [option["required"] for option in prioritize["anyOf"]] == [["high_priority"], ["priority"]]
    assert schema["components"]["schemas"]["ChartSubmitRequest"]["additionalProperties"] is False


def test_docs_load_nothing_from_elsewhere(tenants: Tenants) -> None:
    response = APIClient().get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources
    assert all(source.startswith("/") for source in sources), sources


# Refusals of values a schema cannot know: rows stored (an org's slug, a workflow's name, a user, a
# provider), the org a staff caller must name and the staff levers a tenant may not pull (alone a 403;
# with other errors listed in their 400), by the messages the API gives them. A positive case refused
# with only these is not a false refusal.
REFERENCES = (
    "unknown org",
    "org is required",
    "unknown workflow ",
    "unknown user ",
    "unknown provider ",
    "only operators (staff) may set high_priority",
    "tenants may set priority from",
    # Rules over what is stored and when: a chart's state, a setting against the stored other one
    # (the ceiling of the backoff and its base), a pause's end against the clock.
    "is not waiting",
    "backoff_ceiling must be >= backoff_base",
    "until must be in the future",
    "due_at is in the past",
    "has no turnaround for this workflow to change",
    # A cursor is opaque: only one the server gave is one (the change feed's `after`); a schema can say
    # it is a string, not which strings it wrote.
    "not a cursor of this feed",
    # A webhook's destination is judged against the settings (the schemes allowed) and the DNS at
    # registration (the host resolves, every address public): no schema can say which hosts those are.
    "the URL must ",
    "the URL's port is not a number",
    "does not resolve",
    "has a non-public address",
    # The last resort: "no control or format character" (Unicode categories Cc, Cf) has no portable
    # JSON Schema pattern (ECMA-262 regular expressions without the u flag cannot name a category nor
    # the format characters beyond U+FFFF), so the schema says it in words (`visible` fields) only.
    "must not contain control or invisible characters",
    # Nor "no NUL anywhere in the body, keys included" (PostgreSQL's text refuses it) but by a pattern on
    # every string and every object's keys; it is the body's rule (`common.strict`), said once in words.
    "must not contain NUL characters",
)


def _messages(body: Any) -> Iterator[str]:
    """Every message of an error body, at any depth (a bulk's are by item and field)."""
    if isinstance(body, dict):
        for value in body.values():
            yield from _messages(value)
    elif isinstance(body, list):
        for value in body:
            yield from _messages(value)
    elif isinstance(body, str):
        yield body


def positive_data_acceptance_but_references(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's positive_data_acceptance, except for a 400 that refuses only REFERENCES."""
    if response.status_code == 400:
        messages = list(_messages(response.json()))
        if messages and all(any(reference in message for reference in REFERENCES) for message in messages):
            return None
    result: bool | None = positive_data_acceptance(ctx, response, case)
    return result


# A request the schema allows may still be refused as unauthorised, not found, in conflict, over a rate or
# with a stale If-Match: the statuses a valid request can get (400 only as REFERENCES says).
ACCEPTED_STATUSES = ["2xx", "401", "403", "404", "409", "412", "429"]
# An invalid request is refused; a stale If-Match may be answered first (412: preconditions are judged
# before the body is read, RFC 9110 section 13.2.1).
REFUSED_STATUSES = ["400", "401", "403", "404", "405", "406", "409", "412", "413", "415", "422", "428", "429"]


@pytest.mark.slow
@pytest.mark.parametrize("who", ["member", "staff"])
def test_every_operation_conforms(tenants: Tenants, wsgi_app: Any, who: str) -> None:
    """No 5xx, every documented response matches the schema, every request the schema refuses is
    refused (negative data, in the query, the path, the headers and the body) and every one it allows is
    accepted (positive data), as a member and as staff."""
    ChartFactory.create_batch(3, org=tenants.org_a, workflow=tenants.workflow)
    ProviderFactory(slug="llm")
    user, org = (tenants.member_a, tenants.org_a) if who == "member" else (tenants.staff, None)
    secret = api_token_issue(user=user, org=org, staff=org is None)  # type: ignore[arg-type]
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    schema.config.checks.positive_data_acceptance.expected_statuses = ACCEPTED_STATUSES
    schema.config.checks.negative_data_rejection.expected_statuses = REFUSED_STATUSES
    # Every answer, errors included, is one the schema documents, with the documented body and headers.
    checks = [
        not_a_server_error,
        status_code_conformance,
        response_schema_conformance,
        content_type_conformance,
        response_headers_conformance,
        negative_data_rejection,
        positive_data_acceptance_but_references,
    ]
    failures: list[str] = []
    calls: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        # Valid requests and invalid ones; an operation that takes nothing has no invalid request.
        cases = operation.as_strategy()
        takes = [operation.path_parameters, operation.query, operation.headers, operation.body]
        if any(len(part) for part in takes):
            cases |= operation.as_strategy(GenerationMode.NEGATIVE)

        @given(case=cases)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=DERANDOMIZE,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            calls.append(1)
            case.call_and_validate(headers={"Authorization": f"Token {secret}"}, checks=checks)

        try:
            check()
        except (Exception, FailureGroup) as error:  # collect them all, report at the end
            failures.append(f"{operation.method.upper()} {operation.path}: {error}")
    assert not failures, "\n\n".join(failures)
    assert len(calls) >= 20 * EXAMPLES_PER_OPERATION


def _shape(body: Any) -> Any:
    """What a client parses: the keys and the kind of each value (a list of strings, a string, ...)."""
    if isinstance(body, dict):
        return {key: _shape(value) for key, value in body.items()}
    if isinstance(body, list):
        return [_shape(value) for value in body[:1]]
    return type(body).__name__


def _real_errors(tenants: Tenants, settings: Any) -> dict[str, Any]:
    """Each error status as the API really answers it (409 and 429 through the real exception handler)."""
    member = APIClient()
    member.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=tenants.member_a, org=tenants.org_a)}")
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    answers = {
        "400": member.post("/api/v1/charts/", {"external_id": "chart-0001"}, format="json"),
        "401": stranger.get("/api/v1/charts/"),
        "403": member.post("/api/v1/orgs/", {"slug": "beta", "name": "Beta"}, format="json"),
        "404": member.get("/api/v1/charts/999999/"),
        "413": member.post("/api/v1/charts/", {"external_id": "x" * 200}, format="json"),
        "415": member.post("/api/v1/charts/", "workflow=render", content_type="text/plain"),
    }
    real = {code: answer.json() for code, answer in answers.items()}
    assert {code: answer.status_code for code, answer in answers.items()} == {code: int(code) for code in answers}
    real["409"] = api_exception_handler(Conflict("chart 7 is running and cannot be cancelled", field="state"), {}).data
    real["429"] = api_exception_handler(QueueFull("acme's queue is full", retry_after=30), {}).data
    return real


def test_each_error_status_has_its_own_schema_and_a_true_example(
    schema: dict[str, Any], tenants: Tenants, settings: Any
) -> None:
    components = schema["components"]["schemas"]
    real = _real_errors(tenants, settings)

    examples: dict[str, Any] = {}
    for methods in schema["paths"].values():
        for method, operation in methods.items():
            for code, response in operation.get("responses", {}).items():
                if code.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
                    assert ref == f"Error{code}", (method, code, ref)
                    examples[code] = components[ref]["example"]

    assert set(examples) >= {"400", "401", "403", "404", "409", "413", "415", "429"}
    assert len({repr(example) for example in examples.values()}) == len(examples), examples
    for code, body in real.items():
        assert _shape(examples[code]) == _shape(body), (code, examples[code], body)
        assert components[f"Error{code}"]["type"] == "object"


# Words of implementation notes (benchmarks, the framework, code names), never of the public API.
JARGON = re.compile(
    r"\bCPU\b|\bDRF\b|deep-cop|\d\s*ms\b|\bms\b|#\d+|\bbench|\bµs\b"
    r"|_[a-z]+_[a-z_]+\(|`parse_|Serializer\b|\.selectors\."
)


def test_descriptions_are_for_users(schema: dict[str, Any]) -> None:
    found: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "description" and isinstance(value, str) and JARGON.search(value):
                    found.append(f"{where}: {value}")
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}[{index}]")

    walk(schema, "")
    assert found == []


def test_examples_look_like_real_data_and_payload_is_an_object(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]

    for name in ("ChartSubmitRequest", "BulkItemRequest", "ChartDetail"):
        assert components[name]["properties"]["payload"]["type"] == "object", name
    assert components["ChartSubmitRequest"]["properties"]["external_id"]["example"] == "chart-0001"
    assert components["ChartSubmitRequest"]["properties"]["org"]["example"] == "acme"
    slugs = [
        parameter
        for path, methods in schema["paths"].items()
        if path.startswith("/api/v1/orgs/{slug}/")
        for operation in methods.values()
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "slug"
    ]
    assert slugs
    assert {parameter["schema"].get("example") for parameter in slugs} == {"acme"}


def test_the_schema_states_the_rules_the_server_judges_by(schema: dict[str, Any]) -> None:
    """What Schemathesis's positive and negative data found the schema silent about."""
    components = schema["components"]["schemas"]
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/charts/"]["get"]["parameters"]}

    assert parameters["page_size"]["minimum"] == 1
    assert re.fullmatch(parameters["state"]["pattern"].strip("^$"), "queued, running")
    assert not re.fullmatch(parameters["state"]["pattern"].strip("^$"), "queued,,running")
    config = components["PatchedSchedulerConfigUpdateRequest"]["properties"]
    assert (config["reconcile_interval"]["minimum"], config["reconcile_interval"]["maximum"]) == (0.5, 3600)
    assert config["quantum"]["exclusiveMinimum"] is True
    assert components["PatchedWorkflowUpdateRequest"]["minProperties"] == 1
    assert schema["paths"]["/api/v1/workflows/{name}/"]["patch"]["requestBody"]["required"] is True
    assert [branch["required"] for branch in components["PriorityChangeRequest"]["anyOf"]] == [
        ["high_priority"],
        ["priority"],
    ]
    assert [branch["required"] for branch in components["ApiTokenIssueRequest"]["oneOf"]] == [["org"], ["staff"]]


def test_a_cost_removal_documents_its_reason(schema: dict[str, Any]) -> None:
    """drf-spectacular leaves a DELETE's body out: the reason is a documented query parameter, and the
    description says the body takes it too."""
    operation = schema["paths"]["/api/v1/orgs/{slug}/costs/{workflow}/"]["delete"]

    reason = next(parameter for parameter in operation["parameters"] if parameter["name"] == "reason")
    assert reason["in"] == "query"
    assert reason["schema"]["maxLength"] == 500
    assert '{"reason": "..."}' in operation["description"]
