"""Bulk submission: up to 10,000 charts of one org, all or nothing, errors per item."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from charts.models import Chart, ChartEvent
from charts.services import MAX_BULK_ITEMS
from tests.conftest import Tenants

Client = Callable[[Any], APIClient]


def items(count: int, prefix: str = "b") -> list[dict[str, Any]]:
    return [{"workflow": "render", "external_id": f"{prefix}-{i}"} for i in range(count)]


@pytest.mark.slow
def test_ten_thousand_charts_in_one_request(tenants: Tenants, client_for: Client) -> None:
    client = client_for(tenants.member_a)
    body = {"items": items(MAX_BULK_ITEMS)}

    first = client.post("/api/v1/charts/bulk/", body, format="json")
    repeat = client.post("/api/v1/charts/bulk/", body, format="json")

    assert first.status_code == 201
    assert (first.json()["created"], first.json()["existing"]) == (MAX_BULK_ITEMS, 0)
    assert Chart.objects.filter(org=tenants.org_a).count() == MAX_BULK_ITEMS
    assert ChartEvent.objects.count() == MAX_BULK_ITEMS
    assert repeat.status_code == 200
    assert (repeat.json()["created"], repeat.json()["existing"]) == (0, MAX_BULK_ITEMS)
    assert [c["id"] for c in repeat.json()["charts"]] == [c["id"] for c in first.json()["charts"]]


@pytest.mark.slow
def test_one_bad_item_of_ten_thousand_writes_nothing(tenants: Tenants, client_for: Client) -> None:
    body = {"items": items(MAX_BULK_ITEMS)}
    body["items"][7345]["workflow"] = "no-such-workflow"

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {"items": {"7345": {"workflow": ["unknown workflow 'no-such-workflow'"]}}}
    assert not Chart.objects.exists()


def test_more_than_the_limit_is_refused(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.member_a).post(
        "/api/v1/charts/bulk/", {"items": items(MAX_BULK_ITEMS + 1)}, format="json"
    )

    assert response.status_code == 400
    assert "items" in response.json()
    assert not Chart.objects.exists()


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ("not an object", "detail"),
        ({"external_id": "x"}, "workflow"),
        ({"workflow": "render"}, "external_id"),
        ({"workflow": "render", "external_id": 5}, "external_id"),
        ({"workflow": "render", "external_id": "x", "colour": "red"}, "colour"),
        ({"workflow": "render", "external_id": "x", "priority": 1001}, "priority"),
        ({"workflow": "render", "external_id": "x", "payload": "text"}, "payload"),
        ({"workflow": "render", "external_id": "b-0"}, "external_id"),  # repeats item 0
    ],
)
def test_bad_items_are_reported_by_index(tenants: Tenants, client_for: Client, item: Any, field: str) -> None:
    body = {"items": [*items(2), item]}

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["items"]["2"]
    assert not Chart.objects.exists()


@pytest.mark.parametrize("body", [[], {"items": []}, {"items": "x"}, {}, {"org": 5, "items": items(1)}])
def test_malformed_bodies_are_400(tenants: Tenants, client_for: Client, body: Any) -> None:
    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert not Chart.objects.exists()


def test_nul_characters_are_refused_before_the_database(tenants: Tenants, client_for: Client) -> None:
    body = {"items": [{"workflow": "render", "external_id": "x\x00"}]}

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {"items": ["must not contain NUL characters"]}


def test_bulk_into_another_org_is_refused(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.member_a).post(
        "/api/v1/charts/bulk/", {"org": "beta", "items": items(3)}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"org": ["unknown org 'beta'"]}
    assert not Chart.objects.exists()


def test_bulk_over_the_queue_limit_is_429_and_writes_nothing(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.queue_limit = 5
    tenants.org_a.save()

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", {"items": items(6)}, format="json")

    assert response.status_code == 429
    assert "Retry-After" in response
    assert not Chart.objects.exists()


def test_a_bad_bulk_that_would_overflow_the_queue_says_so_with_its_errors(tenants: Tenants, client_for: Client) -> None:
    """Validation first (400, every item), and in the same answer that the queue limit would refuse it
    once fixed: one round trip to learn both. All or nothing: nothing is written."""
    tenants.org_a.queue_limit = 5
    tenants.org_a.save()
    body = {"items": [*items(5), {"workflow": "nope", "external_id": "bad"}]}

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert response.json()["items"] == {"5": {"workflow": ["unknown workflow 'nope'"]}}
    (note,) = response.json()["org"]
    assert "6 new chart(s) would not be admitted" in note
    assert "queue limit is 5" in note
    assert not Chart.objects.exists()


def test_a_bad_bulk_within_the_queue_limit_names_only_its_items(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.queue_limit = 6
    tenants.org_a.save()
    body = {"items": [*items(5), {"workflow": "nope", "external_id": "bad"}]}

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"items"}


def test_refused_levers_of_a_bulk_that_would_overflow_the_queue_are_a_400(tenants: Tenants, client_for: Client) -> None:
    """Refused levers alone are a 403; with the queue's refusal as well, the answer lists both (400)."""
    tenants.org_a.queue_limit = 1
    tenants.org_a.save()
    body = {"items": [*items(1), {"workflow": "render", "external_id": "h", "high_priority": True}]}

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"items", "org"}
    assert set(response.json()["items"]["1"]) == {"high_priority"}
    assert not Chart.objects.exists()


def test_a_single_bad_submit_to_a_full_queue_says_both(tenants: Tenants, client_for: Client) -> None:
    tenants.org_a.queue_limit = 1
    tenants.org_a.save()
    client = client_for(tenants.member_a)
    assert client.post("/api/v1/charts/", items(1)[0], format="json").status_code == 201

    response = client.post("/api/v1/charts/", {"workflow": "nope", "external_id": "new"}, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"workflow", "org"}
    assert Chart.objects.count() == 1


def test_staff_bulk_names_the_org(tenants: Tenants, client_for: Client) -> None:
    response = client_for(tenants.staff).post("/api/v1/charts/bulk/", {"org": "beta", "items": items(3)}, format="json")

    assert response.status_code == 201
    assert Chart.objects.filter(org=tenants.org_b).count() == 3


def test_every_error_of_every_item_is_in_one_400(tenants: Tenants, client_for: Client) -> None:
    body = {
        "items": [
            {"workflow": "no-such-workflow", "external_id": "e-0"},
            {"workflow": "render", "external_id": "", "priority": 99},
            {"workflow": "render", "external_id": "e-2", "priority": "abc", "colour": "red"},
            {"workflow": "render", "external_id": "e-0", "high_priority": True},
            {"external_id": 5, "payload": "text"},
        ]
    }

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    errors = response.json()["items"]
    assert errors["0"] == {"workflow": ["unknown workflow 'no-such-workflow'"]}
    assert set(errors["1"]) == {"external_id", "priority"}
    assert "-10 to 10" in errors["1"]["priority"][0]
    assert set(errors["2"]) == {"priority", "colour"}
    assert set(errors["3"]) == {"external_id", "high_priority"}
    assert "repeats item 0" in errors["3"]["external_id"][0]
    assert set(errors["4"]) == {"workflow", "external_id", "payload"}
    assert not Chart.objects.exists()


def test_only_refused_levers_are_403_naming_each_item(tenants: Tenants, client_for: Client) -> None:
    body = {"items": [*items(1), {"workflow": "render", "external_id": "h", "high_priority": True, "priority": 11}]}

    response = client_for(tenants.member_a).post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 403
    assert set(response.json()["items"]["1"]) == {"high_priority", "priority"}
    assert not Chart.objects.exists()


def test_a_repeat_with_another_workflow_is_listed_with_the_other_errors(tenants: Tenants, client_for: Client) -> None:
    from tests.factories import WorkflowFactory

    WorkflowFactory(name="simulate")
    client = client_for(tenants.member_a)
    assert (
        client.post("/api/v1/charts/", {"workflow": "render", "external_id": "old"}, format="json").status_code == 201
    )
    body = {"items": [{"workflow": "simulate", "external_id": "old"}, {"workflow": "nope", "external_id": "new"}]}

    response = client.post("/api/v1/charts/bulk/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "items": {
            "0": {"external_id": ["already submitted with another workflow"]},
            "1": {"workflow": ["unknown workflow 'nope'"]},
        }
    }
    assert Chart.objects.count() == 1
