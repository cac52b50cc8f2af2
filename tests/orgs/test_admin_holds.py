"""The admin shows holds as what they are: a "Held" badge in the orgs' list (not a green check), the
hold and its reason on the change page with a hold or release button, every hold and release (made
anywhere) in the change page's History, and a reason for the list's weight edits."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from common.actors import Actor
from orgs import services
from orgs.models import Org, OrgChange
from tests.admin_helpers import action_data, changelist_data, messages_of
from tests.conftest import Tenants

pytestmark = pytest.mark.django_db

ORGS = reverse("admin:orgs_org_changelist")


@pytest.fixture
def staff_client(client: Client, tenants: Tenants) -> Client:
    client.force_login(tenants.staff)
    return client


def change_url(org: Org) -> str:
    return reverse("admin:orgs_org_change", args=[org.pk])


def row_of(html: str, slug: str) -> str:
    start = html.index(f'<td class="field-slug">{slug}</td>')
    return html[html.rindex("<tr", 0, start) : html.index("</tr>", start)]


def test_a_held_org_shows_a_held_badge_in_the_list_not_a_check(staff_client: Client, tenants: Tenants) -> None:
    services.org_hold(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="invoice overdue")

    html = staff_client.get(ORGS).content.decode()

    held, free = row_of(html, "acme"), row_of(html, "beta")
    assert 'class="held-badge"' in held
    assert ">Held<" in held
    assert "invoice overdue" in held
    assert "icon-yes" not in held
    assert "icon-no" not in held
    assert "held-badge" not in free


def test_the_change_page_shows_the_hold_its_reason_and_a_release_button(staff_client: Client, tenants: Tenants) -> None:
    services.org_hold(org=tenants.org_a, actor=Actor("user:stella", staff=True), reason="invoice overdue")

    html = staff_client.get(change_url(tenants.org_a)).content.decode()

    assert "Held: invoice overdue" in html
    assert 'value="release"' in html
    assert 'value="hold"' not in html
    assert 'class="hold-control"' in html


def test_the_change_page_of_a_free_org_offers_a_hold(staff_client: Client, tenants: Tenants) -> None:
    html = staff_client.get(change_url(tenants.org_b)).content.decode()

    assert "Not held" in html
    assert 'value="hold"' in html
    assert 'value="release"' not in html


def test_the_change_page_s_hold_button_holds_with_its_reason_and_comes_back(
    staff_client: Client, tenants: Tenants
) -> None:
    data = {**action_data("hold", tenants.org_a.pk), "reason": "maintenance window", "_change_page": "1"}

    response = staff_client.post(ORGS, data)

    assert response.status_code == 302
    assert response["Location"] == change_url(tenants.org_a)
    tenants.org_a.refresh_from_db()
    assert (tenants.org_a.is_held, tenants.org_a.hold_reason) == (True, "maintenance window")
    page = staff_client.get(response["Location"])
    assert "Held 1 item(s)." in messages_of(page)
    assert "Held: maintenance window" in page.content.decode()


def test_the_history_lists_holds_and_releases_made_anywhere(staff_client: Client, tenants: Tenants) -> None:
    services.org_hold(org=tenants.org_a, actor=Actor("token:ops", staff=True), reason="invoice overdue")
    services.org_release(org=tenants.org_a, actor=Actor("user:dana", staff=True), reason="paid")

    html = staff_client.get(reverse("admin:orgs_org_history", args=[tenants.org_a.pk])).content.decode()

    assert "invoice overdue" in html
    assert "token:ops" in html
    assert "paid" in html
    assert "user:dana" in html
    assert html.index("invoice overdue") > html.index("paid")  # newest first


def test_another_org_s_history_shows_none_of_this_one_s(staff_client: Client, tenants: Tenants) -> None:
    services.org_hold(org=tenants.org_a, actor=Actor("token:ops", staff=True), reason="invoice overdue")

    html = staff_client.get(reverse("admin:orgs_org_history", args=[tenants.org_b.pk])).content.decode()

    assert "invoice overdue" not in html


def test_a_weight_edited_in_the_list_carries_the_action_bar_s_reason(staff_client: Client, tenants: Tenants) -> None:
    data: dict[str, Any] = changelist_data(staff_client.get(ORGS))
    index = next(i for i in range(2) if data[f"form-{i}-id"] == tenants.org_a.pk)
    data[f"form-{index}-weight"] = "7"
    data["reason"] = "bigger contract"

    staff_client.post(ORGS, data)

    change = OrgChange.objects.get(org=tenants.org_a)
    assert (change.field, change.new_value, change.reason) == ("weight", "7", "bigger contract")


def test_a_bad_reason_for_a_list_edit_writes_nothing(staff_client: Client, tenants: Tenants) -> None:
    data: dict[str, Any] = changelist_data(staff_client.get(ORGS))
    index = next(i for i in range(2) if data[f"form-{i}-id"] == tenants.org_a.pk)
    data[f"form-{index}-weight"] = "7"
    data["reason"] = "bad\x01reason"

    response = staff_client.post(ORGS, data, follow=True)

    assert any("control or invisible characters" in message for message in messages_of(response))
    tenants.org_a.refresh_from_db()
    assert tenants.org_a.weight == 2
    assert not OrgChange.objects.exists()


def test_the_history_does_not_say_there_is_none_when_the_org_has_some(staff_client: Client, tenants: Tenants) -> None:
    services.org_hold(org=tenants.org_a, actor=Actor("token:ops", staff=True), reason="invoice overdue")

    html = staff_client.get(reverse("admin:orgs_org_history", args=[tenants.org_a.pk])).content.decode()

    assert "have a change history" not in html
