"""Turnaround promises in the account managers' admin: the org's target and share on its form, the
per-workflow overrides in an inline; each through its service, in the org's history, and an inline row
someone else changed while the page was open is not written back."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from common.actors import Actor
from orgs import services
from orgs.models import Org, OrgChange, WorkflowTurnaround
from tests.admin_helpers import change_form_data
from tests.conftest import Tenants
from tests.factories import WorkflowFactory

pytestmark = pytest.mark.django_db

OSCAR = Actor("user:oscar", staff=True)


@pytest.fixture
def staff_client(client: Client, tenants: Tenants) -> Client:
    client.force_login(tenants.staff)
    return client


def history(org: Org) -> list[tuple[str, str, str, str, str]]:
    rows = OrgChange.objects.filter(org=org).order_by("at", "id")
    return [(c.actor, c.field, c.old_value, c.new_value, c.reason) for c in rows]


def test_the_orgs_target_is_set_on_its_form_with_a_reason(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update({"turnaround": "86400", "turnaround_share": "0.95", "reason": "new contract"})

    assert staff_client.post(url, data).status_code == 302

    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.turnaround, org.turnaround_share) == (86400, 0.95)
    assert history(org) == [
        ("user:stella", "turnaround", "", "86400", "new contract"),
        ("user:stella", "turnaround_share", "", "0.95", "new contract"),
    ]


@pytest.mark.parametrize(
    ("field", "value"), [("turnaround", "0"), ("turnaround_share", "0"), ("turnaround_share", "1.5")]
)
def test_a_bad_target_on_the_form_is_refused(staff_client: Client, tenants: Tenants, field: str, value: str) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data[field] = value

    staff_client.post(url, data, follow=True)

    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.turnaround, org.turnaround_share) == (None, None)
    assert not OrgChange.objects.exists()


def test_workflow_turnaround_inline_add_change_and_delete_go_through_the_service(
    staff_client: Client, tenants: Tenants
) -> None:
    simulate = WorkflowFactory(name="simulate")
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])

    data = change_form_data(staff_client.get(url))
    data.update({"workflow_turnarounds-TOTAL_FORMS": "1", "workflow_turnarounds-0-workflow": simulate.pk})
    data.update({"workflow_turnarounds-0-turnaround": "3600", "workflow_turnarounds-0-share": "0.9"})
    assert staff_client.post(url, data).status_code == 302
    row = WorkflowTurnaround.objects.get(org=tenants.org_a, workflow=simulate)
    assert (row.turnaround, row.share) == (3600, 0.9)

    data = change_form_data(staff_client.get(url))
    data["workflow_turnarounds-0-turnaround"] = "1800"
    assert staff_client.post(url, data).status_code == 302
    assert WorkflowTurnaround.objects.get().turnaround == 1800

    data = change_form_data(staff_client.get(url))
    data["workflow_turnarounds-0-DELETE"] = "on"
    assert staff_client.post(url, data).status_code == 302
    assert not WorkflowTurnaround.objects.exists()

    assert [line[1:4] for line in history(tenants.org_a)] == [
        ("turnaround:simulate", "org's", "3600"),
        ("turnaround_share:simulate", "org's", "0.9"),
        ("turnaround:simulate", "3600", "1800"),
        ("turnaround:simulate", "1800", "org's"),
        ("turnaround_share:simulate", "0.9", "org's"),
    ]


def test_an_inline_turnaround_changed_while_the_form_was_open_stays_as_left(
    staff_client: Client, tenants: Tenants
) -> None:
    WorkflowTurnaround.objects.create(org=tenants.org_a, workflow=tenants.workflow, turnaround=3600)
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])

    # Another field edited: the row changed meanwhile is not written back.
    data = change_form_data(staff_client.get(url))
    services.workflow_turnaround_set(org=tenants.org_a, workflow=tenants.workflow, turnaround=600, actor=OSCAR)
    data["queue_limit"] = "50"
    assert staff_client.post(url, data).status_code == 302
    assert WorkflowTurnaround.objects.get().turnaround == 600

    # The same row edited: refused, naming the value stored now; nothing of the save is written.
    data = change_form_data(staff_client.get(url))
    services.workflow_turnaround_set(org=tenants.org_a, workflow=tenants.workflow, turnaround=900, actor=OSCAR)
    data.update({"workflow_turnarounds-0-turnaround": "7200", "queue_limit": "60"})
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "it is now 900" in response.content.decode()
    assert WorkflowTurnaround.objects.get().turnaround == 900
    assert Org.objects.get(pk=tenants.org_a.pk).queue_limit == 50


def test_a_bad_turnaround_in_the_inline_is_a_form_error(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update({"workflow_turnarounds-TOTAL_FORMS": "1", "workflow_turnarounds-0-workflow": tenants.workflow.pk})
    data["workflow_turnarounds-0-turnaround"] = "0"

    response = staff_client.post(url, data)

    assert response.status_code == 200
    assert not WorkflowTurnaround.objects.exists()
    assert not OrgChange.objects.exists()
