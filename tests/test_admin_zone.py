"""The admin's forms read and write datetimes in the signed-in account's zone (UTC for an account without
one), the zone named beside each datetime widget; what the admin prints as a `<time>` and what the API
answers stay in UTC. A read-only field without a value says so in words, never "None"."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from charts.models import Chart
from orgs.models import ProviderPause
from orgs.services import viewer_zone_set
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

# A winter day (New York is UTC-5) after the tests' clock, so a pause until then is in the future.
WINTER_DAY = "2027-01-15"


@pytest.fixture
def staff_client(tenants: Tenants) -> Client:
    client = Client()
    client.force_login(tenants.staff)
    return client


def errors(page: bytes) -> list[str]:
    return re.findall(r"errorlist.*?</ul>", page.decode(), re.S)


def add_chart_due(client: Client, tenants: Tenants, external_id: str) -> Chart:
    response = client.post(
        reverse("admin:charts_chart_add"),
        {
            "org": tenants.org_a.pk,
            "workflow": tenants.workflow.pk,
            "external_id": external_id,
            "payload": "{}",
            "priority": "0",
            "due_at_0": WINTER_DAY,
            "due_at_1": "09:00:00",
            "events-TOTAL_FORMS": "0",
            "events-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, errors(response.content)
    return Chart.objects.get(external_id=external_id)


def test_an_account_in_new_york_enters_nine_and_fourteen_utc_is_kept(tenants: Tenants, staff_client: Client) -> None:
    viewer_zone_set(user=tenants.staff, zone="America/New_York")

    chart = add_chart_due(staff_client, tenants, "due-ny")
    assert chart.due_at == datetime(2027, 1, 15, 14, 0, tzinfo=UTC)

    provider = ProviderFactory()
    response = staff_client.post(
        reverse("admin:orgs_providerpause_add"),
        {"provider": provider.pk, "org": "", "until_0": WINTER_DAY, "until_1": "09:00:00", "reason": "throttled"},
    )
    assert response.status_code == 302, errors(response.content)
    assert ProviderPause.objects.get(provider=provider).until == datetime(2027, 1, 15, 14, 0, tzinfo=UTC)


def test_an_account_without_a_zone_enters_utc(tenants: Tenants, staff_client: Client) -> None:
    chart = add_chart_due(staff_client, tenants, "due-utc")
    assert chart.due_at == datetime(2027, 1, 15, 9, 0, tzinfo=UTC)


def test_the_widget_names_the_zone_and_shows_the_value_in_it(tenants: Tenants, staff_client: Client) -> None:
    viewer_zone_set(user=tenants.staff, zone="America/New_York")
    page = staff_client.get(reverse("admin:charts_chart_add")).content.decode()
    assert re.search(r'id="id_due_at_1"[^>]*>.*?class="zone-named"[^>]*>America/New_York<', page, re.S)

    user_page = staff_client.get(reverse("admin:auth_user_change", args=[tenants.member_a.pk])).content.decode()
    new_york = tenants.member_a.date_joined.astimezone(ZoneInfo("America/New_York"))
    assert f'name="date_joined_1" value="{new_york:%H:%M:%S}"' in user_page
    assert 'class="zone-named">America/New_York<' in user_page

    viewer_zone_set(user=tenants.staff, zone=None)
    page = staff_client.get(reverse("admin:charts_chart_add")).content.decode()
    assert 'class="zone-named">UTC<' in page


def test_times_printed_and_the_api_stay_utc_under_the_accounts_zone(tenants: Tenants, staff_client: Client) -> None:
    viewer_zone_set(user=tenants.staff, zone="America/New_York")
    chart = add_chart_due(staff_client, tenants, "due-api")

    page = staff_client.get(reverse("admin:charts_chart_change", args=[chart.pk])).content.decode()
    assert '<time datetime="2027-01-15T14:00:00+00:00">2027-01-15 14:00:00 UTC</time>' in page
    history = staff_client.get(reverse("admin:charts_chart_history", args=[chart.pk])).content.decode()
    assert re.search(r'<time datetime="[^"]+\+00:00">[^<]+ UTC</time>', history)

    answer = staff_client.get(f"/api/v1/charts/{chart.pk}/", HTTP_ACCEPT="application/json").json()
    assert answer["due_at"] in ("2027-01-15T14:00:00Z", "2027-01-15T14:00:00+00:00")
    assert timezone.get_current_timezone_name() == "UTC"  # the request's zone does not outlive it


def test_a_chart_without_a_plan_says_not_planned_not_none(tenants: Tenants, staff_client: Client) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="unplanned")
    page = staff_client.get(reverse("admin:charts_chart_change", args=[chart.pk])).content.decode()
    readonly = " ".join(re.findall(r'<div class="readonly">(.*?)</div>', page, re.S))
    assert "None" not in readonly
    assert "not planned" in readonly


def test_no_change_page_prints_none_for_an_empty_read_only_field(tenants: Tenants, staff_client: Client) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="empty-fields")
    pause = ProviderPause.objects.create(provider=ProviderFactory(), until=datetime(2027, 1, 1, tzinfo=UTC))
    rows = {Chart: chart, ProviderPause: pause}
    for model in admin.site._registry:
        row = rows.get(model) or model._default_manager.first()
        if row is None:
            continue
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[row.pk])
        page = staff_client.get(url).content.decode()
        readonly = re.findall(r'<div class="readonly">(.*?)</div>', page, re.S)
        assert not [value for value in readonly if value.strip() == "None"], (model, readonly)
