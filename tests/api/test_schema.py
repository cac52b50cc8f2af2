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
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from orgs.access import api_token_issue
from scheduling import services
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

# A few examples per operation keep this under a minute; FAIRSCHED_SCHEMA_EXAMPLES raises it for a deep run.
EXAMPLES_PER_OPERATION = int(os.environ.get("FAIRSCHED_SCHEMA_EXAMPLES", "6"))


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


def test_every_operation_documents_its_errors(tenants: Tenants) -> None:
    schema = APIClient().get("/api/schema/?format=json").json()
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


@pytest.mark.slow
@pytest.mark.parametrize("who", ["member", "staff"])
def test_every_operation_conforms(tenants: Tenants, wsgi_app: Any, who: str) -> None:
    """No 5xx and every documented response matches the schema, as a member and as staff."""
    ChartFactory.create_batch(3, org=tenants.org_a, workflow=tenants.workflow)
    ProviderFactory(slug="llm")
    user, org = (tenants.member_a, tenants.org_a) if who == "member" else (tenants.staff, None)
    secret = api_token_issue(user=user, org=org, staff=org is None)  # type: ignore[arg-type]
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app)
    # Every answer, errors included, is one the schema documents, with the documented body and headers.
    checks = [
        not_a_server_error,
        status_code_conformance,
        response_schema_conformance,
        content_type_conformance,
        response_headers_conformance,
    ]
    failures: list[str] = []
    calls: list[int] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path == "/api/v1/scheduler/plan-preview/" and not hasattr(services, "plan_preview"):
            continue

        # Valid requests and invalid ones: neither may bring a 5xx or an undocumented response shape.
        cases = operation.as_strategy() | operation.as_strategy(GenerationMode.NEGATIVE)

        @given(case=cases)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            calls.append(1)
            case.call_and_validate(headers={"Authorization": f"Token {secret}"}, checks=checks)

        try:
            check()
        except Exception as error:  # collect them all, report at the end
            failures.append(f"{operation.method.upper()} {operation.path}: {error}")
    assert not failures, "\n\n".join(failures)
    assert len(calls) >= 20 * EXAMPLES_PER_OPERATION
