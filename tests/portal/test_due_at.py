"""A chart's due time from the portal: the submit form's `due_at`, a CSV column, a JSON file's key;
refused naming the row and field when past, accepted with a warning when sooner than a run takes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from charts.models import Chart
from orgs.models import Org, Workflow
from tests.conftest import Tenants

Browser = Callable[[Any], Client]
DUE = "2099-01-01T12:00:00Z"
DUE_AT = datetime.fromisoformat("2099-01-01T12:00:00+00:00")


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/plain")


def test_the_form_sets_a_due_time(tenants: Tenants, browser: Browser) -> None:
    page = browser(tenants.member_a).get("/portal/acme/")
    assert b'name="due_at"' in page.content

    response = browser(tenants.member_a).post(
        "/portal/acme/submit/", {"workflow": "render", "external_id": "f", "due_at": DUE}
    )

    assert response.status_code == 302
    assert Chart.objects.get().due_at == DUE_AT


def test_the_form_without_one_takes_the_orgs_target(tenants: Tenants, browser: Browser) -> None:
    Org.objects.filter(pk=tenants.org_a.pk).update(turnaround=3600)

    browser(tenants.member_a).post("/portal/acme/submit/", {"workflow": "render", "external_id": "t", "due_at": ""})

    chart = Chart.objects.get()
    assert chart.due_at == chart.created_at + timedelta(hours=1)


def test_the_form_refuses_a_past_due_time_naming_it(tenants: Tenants, browser: Browser) -> None:
    response = browser(tenants.member_a).post(
        "/portal/acme/submit/", {"workflow": "render", "external_id": "p", "due_at": "2001-01-01T00:00:00Z"}
    )

    assert response.status_code == 400
    assert "due_at: due_at is in the past" in response.content.decode()
    assert "2001-01-01T00:00:00Z" in response.content.decode()  # what was typed is kept
    assert not Chart.objects.exists()


def test_the_form_warns_of_a_due_time_sooner_than_a_run(tenants: Tenants, browser: Browser) -> None:
    Workflow.objects.filter(pk=tenants.workflow.pk).update(initial_duration=3600)
    soon = (timezone.now() + timedelta(minutes=10)).replace(microsecond=0)

    response = browser(tenants.member_a).post(
        "/portal/acme/submit/", {"workflow": "render", "external_id": "w", "due_at": soon.isoformat()}, follow=True
    )

    assert response.status_code == 200
    assert "likely to be late" in response.content.decode()
    assert Chart.objects.get().due_at == soon


def test_a_csv_file_sets_due_times(tenants: Tenants, browser: Browser) -> None:
    Org.objects.filter(pk=tenants.org_a.pk).update(turnaround=60)
    text = f"workflow,external_id,due_at\nrender,c-1,{DUE}\nrender,c-2,\n"

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": upload("c.csv", text)})

    assert response.status_code == 302
    charts = {chart.external_id: chart for chart in Chart.objects.all()}
    assert charts["c-1"].due_at == DUE_AT
    assert charts["c-2"].due_at == charts["c-2"].created_at + timedelta(seconds=60)


def test_a_csv_file_with_a_past_due_time_is_refused_naming_the_row(tenants: Tenants, browser: Browser) -> None:
    text = f"workflow,external_id,due_at\nrender,c-1,{DUE}\nrender,c-2,2001-01-01T00:00:00Z\nrender,c-3,soon\n"

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": upload("c.csv", text)})

    assert response.status_code == 400
    content = response.content.decode()
    assert "row 2 (line 3): due_at: due_at is in the past" in content
    assert "row 3 (line 4): due_at: due_at must be a date and time" in content
    assert not Chart.objects.exists()


def test_a_json_file_sets_due_times(tenants: Tenants, browser: Browser) -> None:
    items = [{"workflow": "render", "external_id": "j-1", "due_at": DUE}, {"workflow": "render", "external_id": "j-2"}]

    response = browser(tenants.member_a).post("/portal/acme/upload/", {"file": upload("c.json", json.dumps(items))})

    assert response.status_code == 302
    charts = {chart.external_id: chart for chart in Chart.objects.all()}
    assert (charts["j-1"].due_at, charts["j-2"].due_at) == (DUE_AT, None)


@pytest.fixture(autouse=True)
def _db(db: Any) -> None:
    """Every test here reads and writes the database."""
