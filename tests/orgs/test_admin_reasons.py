"""A reason on every lever of the admin: the org's change form, its hold and release actions, the
charts' actions, provider pauses and the scheduler's configuration; each lands in its history and is
shown there. A bad reason (too long, a control character) is refused by name and nothing is written."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from charts.models import Chart, ChartEvent, ChartState
from common.actors import Actor
from knobs.models import ConfigChange, SchedulerConfig
from orgs import services
from orgs.models import Org, OrgChange, ProviderPause, WorkflowCost
from tests.admin_helpers import action_data, change_form_data, messages_of
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

ORGS = reverse("admin:orgs_org_changelist")
CHARTS = reverse("admin:charts_chart_changelist")
PAUSES = reverse("admin:orgs_providerpause_changelist")


@pytest.fixture
def staff_client(client: Client, tenants: Tenants) -> Client:
    client.force_login(tenants.staff)
    return client


def reasons(org: Org) -> list[tuple[str, str]]:
    return [(c.field, c.reason) for c in OrgChange.objects.filter(org=org).order_by("at", "id")]


def test_the_change_form_s_reason_goes_with_every_change_it_makes(staff_client: Client, tenants: Tenants) -> None:
    simulate = WorkflowFactory(name="simulate", default_cost=3)
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update(weight="5", max_concurrency="3", queue_limit="100", reason="  contract renewed  ")
    data.update({"workflow_costs-TOTAL_FORMS": "1", "workflow_costs-0-workflow": simulate.pk})
    data["workflow_costs-0-cost"] = "4"

    assert staff_client.post(url, data).status_code == 302

    assert reasons(tenants.org_a) == [
        ("weight", "contract renewed"),
        ("max_concurrency", "contract renewed"),
        ("queue_limit", "contract renewed"),
        ("cost:simulate", "contract renewed"),
    ]
    page = staff_client.get(url).content.decode()
    assert "contract renewed" in page  # the change history shows it
    assert 'name="reason"' in page
    assert 'value="contract renewed"' not in page


@pytest.mark.parametrize(
    ("reason", "says"), [("x" * 501, "at most 500"), ("tab\there", "U+0009")], ids=["too-long", "control"]
)
def test_a_bad_reason_on_the_change_form_is_a_form_error(
    staff_client: Client, tenants: Tenants, reason: str, says: str
) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update(weight="5", reason=reason)

    response = staff_client.post(url, data)

    assert response.status_code == 200
    assert "reason" in response.context["adminform"].form.errors
    assert says in response.content.decode()
    assert Org.objects.get(pk=tenants.org_a.pk).weight == 2
    assert not OrgChange.objects.exists()


def test_hold_and_release_actions_take_a_reason(staff_client: Client, tenants: Tenants) -> None:
    held = staff_client.post(
        ORGS, {**action_data("hold", tenants.org_a.pk), "reason": "Migration of your data"}, follow=True
    )
    assert "Held 1 item(s)." in messages_of(held)
    assert Org.objects.get(pk=tenants.org_a.pk).hold_reason == "Migration of your data"

    staff_client.post(ORGS, {**action_data("release", tenants.org_a.pk), "reason": "migrated"}, follow=True)

    assert Org.objects.get(pk=tenants.org_a.pk).hold_reason == ""
    assert reasons(tenants.org_a) == [("hold", "Migration of your data"), ("hold", "migrated")]
    page = staff_client.get(reverse("admin:orgs_org_change", args=[tenants.org_a.pk])).content.decode()
    assert "Migration of your data" in page
    assert "migrated" in page


def test_an_action_with_a_bad_reason_changes_nothing_and_says_why(staff_client: Client, tenants: Tenants) -> None:
    response = staff_client.post(
        ORGS, {**action_data("hold", tenants.org_a.pk), "reason": "bad\x1bescape"}, follow=True
    )

    assert any("reason must not contain control" in message for message in messages_of(response))
    assert Org.objects.get(pk=tenants.org_a.pk).weight == 2
    assert not OrgChange.objects.exists()


@pytest.mark.parametrize(
    ("action", "state", "to_state", "recorded"),
    [
        ("pause", ChartState.QUEUED, ChartState.PAUSED, "ops: disk full"),
        ("resume", ChartState.PAUSED, ChartState.QUEUED, "ops: disk full"),
        ("cancel", ChartState.QUEUED, ChartState.CANCELLED, "ops: disk full"),
        ("move_to_top", ChartState.QUEUED, ChartState.QUEUED, "priority set to 1; ops: disk full"),
        ("make_high_priority", ChartState.QUEUED, ChartState.QUEUED, "high_priority set to True; ops: disk full"),
    ],
)
def test_a_chart_action_takes_a_reason(
    staff_client: Client, tenants: Tenants, action: str, state: str, to_state: str, recorded: str
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state)
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow)  # move to top: someone to pass

    staff_client.post(CHARTS, {**action_data(action, chart.pk), "reason": "ops: disk full"}, follow=True)

    assert Chart.objects.get(pk=chart.pk).state == to_state
    assert ChartEvent.objects.filter(chart=chart).order_by("id").last().reason == recorded  # type: ignore[union-attr]
    page = staff_client.get(reverse("admin:charts_chart_change", args=[chart.pk])).content.decode()
    assert "ops: disk full" in page  # the event history shows it


def test_ending_a_provider_pause_takes_a_reason(staff_client: Client, tenants: Tenants) -> None:
    geo = ProviderFactory(slug="geo-api")
    pause = services.provider_pause(
        provider=geo,
        org=tenants.org_a,
        until=timezone.now() + timedelta(minutes=10),
        actor=Actor("user:stella", staff=True),
    )

    staff_client.post(PAUSES, {**action_data("end_now", pause.pk), "reason": "quota raised"}, follow=True)

    assert not ProviderPause.objects.filter(until__gt=timezone.now()).exists()
    assert reasons(tenants.org_a)[-1] == ("provider:geo-api", "quota raised")


def test_the_scheduler_configuration_takes_a_reason(staff_client: Client, tenants: Tenants) -> None:
    config = SchedulerConfig.load()
    url = reverse("admin:knobs_schedulerconfig_change", args=[config.pk])
    data = change_form_data(staff_client.get(url))
    data.update(budget="25", policy="deficit", reason="Black Friday")

    assert staff_client.post(url, data).status_code == 302

    assert sorted(ConfigChange.objects.values_list("field", "reason")) == [
        ("budget", "Black Friday"),
        ("policy", "Black Friday"),
    ]
    assert SchedulerConfig.load().budget == 25
    log = staff_client.get(reverse("admin:knobs_configchange_changelist")).content.decode()
    assert "Black Friday" in log


def test_a_bad_reason_on_the_configuration_writes_nothing(staff_client: Client, tenants: Tenants) -> None:
    config = SchedulerConfig.load()
    url = reverse("admin:knobs_schedulerconfig_change", args=[config.pk])
    data = change_form_data(staff_client.get(url))
    data.update(budget="25", reason="x" * 501)

    response = staff_client.post(url, data)

    assert response.status_code == 200
    assert "reason" in response.context["adminform"].form.errors
    assert SchedulerConfig.load().budget == config.budget
    assert not ConfigChange.objects.exists()
    assert not WorkflowCost.objects.exists()
