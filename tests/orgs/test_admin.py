"""The account managers' admin: every change goes through the services and lands in the org's history."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from charts.models import ChartState
from common.actors import Actor
from common.admin_utils import EditedFieldsForm
from orgs import services
from orgs.models import Membership, Org, OrgChange, ProviderPause, Workflow, WorkflowCost
from tests.admin_helpers import action_data, change_form_data, changelist_data, messages_of
from tests.conftest import Tenants
from tests.factories import ChartFactory, OrgFactory, ProviderFactory, WorkflowFactory

pytestmark = pytest.mark.django_db

STAFF = "user:stella"
ORGS = reverse("admin:orgs_org_changelist")


@pytest.fixture
def staff_client(client: Client, tenants: Tenants) -> Client:
    client.force_login(tenants.staff)
    return client


def history(org: Org) -> list[tuple[str, str, str, str]]:
    rows = OrgChange.objects.filter(org=org).order_by("at", "id")
    return [(c.actor, c.field, c.old_value, c.new_value) for c in rows]


@pytest.mark.parametrize(
    "url",
    [
        "/admin/",
        ORGS,
        reverse("admin:orgs_workflow_changelist"),
        reverse("admin:orgs_providerpause_add"),
        reverse("admin:charts_chart_changelist"),
    ],
)
def test_a_plain_user_is_sent_to_the_login(client: Client, tenants: Tenants, url: str) -> None:
    for user in (tenants.member_a, tenants.outsider):
        client.force_login(user)
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_a_plain_user_cannot_post_an_action(client: Client, tenants: Tenants) -> None:
    client.force_login(tenants.member_a)
    response = client.post(ORGS, action_data("hold", tenants.org_a.pk))
    assert response.status_code == 302
    tenants.org_a.refresh_from_db()
    assert tenants.org_a.weight == 2
    assert not OrgChange.objects.exists()


def test_changelist_shows_weights_holds_caps_and_queued_and_running_counts(
    staff_client: Client, tenants: Tenants
) -> None:
    for state, count in [(ChartState.QUEUED, 3), (ChartState.RUNNING, 2), (ChartState.SUCCEEDED, 4)]:
        for _ in range(count):
            ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=state)
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.QUEUED)
    OrgFactory(name="Delta", slug="delta", weight=0, max_concurrency=2, queue_limit=40)
    response = staff_client.get(ORGS)
    assert response.status_code == 200
    rows: Any = response.context["cl"].result_list
    counts = {org.slug: (org.queued_count, org.running_count) for org in rows}
    assert counts == {"acme": (3, 2), "beta": (1, 0), "delta": (0, 0)}
    html = response.content.decode()
    for header in ("Weight", "Held", "Max concurrency", "Queue limit", "Queued", "Running"):
        assert f">{header}<" in html
    assert 'name="form-0-weight"' in html  # weight is editable in the list


def test_changelist_query_count_does_not_grow_with_orgs_or_charts(
    staff_client: Client, tenants: Tenants, django_assert_max_num_queries: Any
) -> None:
    for index in range(20):
        org = OrgFactory(weight=index % 4)
        ChartFactory(org=org, workflow=tenants.workflow, state=ChartState.QUEUED)
        ChartFactory(org=org, workflow=tenants.workflow, state=ChartState.RUNNING)
    # session, user, the org count, the page of orgs with their chart counts (one grouped query), and
    # the count of all orgs shown next to the filtered one.
    with django_assert_max_num_queries(5):
        response = staff_client.get(ORGS)
    assert len(response.context["cl"].result_list) == 22


def test_weight_edited_in_the_list_goes_through_the_service(staff_client: Client, tenants: Tenants) -> None:
    data = changelist_data(staff_client.get(ORGS))
    index = next(i for i in range(2) if data[f"form-{i}-id"] == tenants.org_a.pk)
    data[f"form-{index}-weight"] = "7"
    response = staff_client.post(ORGS, data, follow=True)
    assert response.status_code == 200
    tenants.org_a.refresh_from_db()
    tenants.org_b.refresh_from_db()
    assert (tenants.org_a.weight, tenants.org_b.weight) == (7, 1)
    assert history(tenants.org_a) == [(STAFF, "weight", "2", "7")]
    assert not OrgChange.objects.filter(org=tenants.org_b).exists()


def test_a_hold_made_while_the_list_was_open_survives_another_row_s_edit(
    staff_client: Client, tenants: Tenants
) -> None:
    data = changelist_data(staff_client.get(ORGS))
    services.org_hold(org=tenants.org_a, actor=Actor("user:oscar", staff=True))
    index = {data[f"form-{i}-id"]: i for i in range(2)}
    data[f"form-{index[tenants.org_b.pk]}-weight"] = "4"
    assert staff_client.post(ORGS, data).status_code == 302
    weights = dict(Org.objects.values_list("slug", "weight"))
    assert weights == {"acme": 0, "beta": 4}
    assert history(tenants.org_a) == [("user:oscar", "hold", "weight 2", "held")]

    data = changelist_data(staff_client.get(ORGS))
    services.org_release(org=tenants.org_a, actor=Actor("user:oscar", staff=True))
    data[f"form-{index[tenants.org_a.pk]}-weight"] = "5"
    response = staff_client.post(ORGS, data)
    assert response.status_code == 200
    assert "it is now 2" in response.context["cl"].formset.errors[index[tenants.org_a.pk]]["weight"][0]
    assert Org.objects.get(pk=tenants.org_a.pk).weight == 2


def test_a_weight_changed_between_the_list_s_check_and_its_save_is_not_overwritten(
    staff_client: Client, tenants: Tenants, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list's forms are checked before the save's transaction opens; an operator's change landing
    in that window (here: right after the check) is found under the org's lock, and nothing is saved."""
    data = changelist_data(staff_client.get(ORGS))
    index = {data[f"form-{i}-id"]: i for i in range(2)}
    data[f"form-{index[tenants.org_a.pk]}-weight"] = "5"
    data[f"form-{index[tenants.org_b.pk]}-weight"] = "4"
    checked = EditedFieldsForm.clean

    def check_then_someone_else_writes(form: EditedFieldsForm) -> Any:
        cleaned = checked(form)
        if form.instance.pk == tenants.org_a.pk:
            services.org_weight_set(org=tenants.org_a, weight=9, actor=Actor("user:oscar", staff=True))
        return cleaned

    monkeypatch.setattr(EditedFieldsForm, "clean", check_then_someone_else_writes)

    response = staff_client.post(ORGS, data, follow=True)

    assert response.status_code == 200
    assert any("it is now 9" in message for message in messages_of(response)), messages_of(response)
    assert dict(Org.objects.values_list("slug", "weight")) == {"acme": 9, "beta": 1}  # all or nothing
    assert history(tenants.org_a) == [("user:oscar", "weight", "2", "9")]
    assert not OrgChange.objects.filter(org=tenants.org_b).exists()


def test_weight_zero_in_the_list_holds_and_release_restores(staff_client: Client, tenants: Tenants) -> None:
    data = changelist_data(staff_client.get(ORGS))
    index = next(i for i in range(2) if data[f"form-{i}-id"] == tenants.org_a.pk)
    data[f"form-{index}-weight"] = "0"
    staff_client.post(ORGS, data)
    tenants.org_a.refresh_from_db()
    assert tenants.org_a.is_held
    staff_client.post(ORGS, action_data("release", tenants.org_a.pk))
    tenants.org_a.refresh_from_db()
    assert tenants.org_a.weight == 2


@pytest.mark.parametrize("weight", ["-1", "abc", "10001"])
def test_a_bad_weight_in_the_list_is_a_form_error(staff_client: Client, tenants: Tenants, weight: str) -> None:
    data = changelist_data(staff_client.get(ORGS))
    index = next(i for i in range(2) if data[f"form-{i}-id"] == tenants.org_a.pk)
    data[f"form-{index}-weight"] = weight
    response = staff_client.post(ORGS, data)
    assert response.status_code == 200
    assert response.context["cl"].formset.errors[index]["weight"]
    tenants.org_a.refresh_from_db()
    assert tenants.org_a.weight == 2
    assert not OrgChange.objects.exists()


def test_hold_and_release_actions(staff_client: Client, tenants: Tenants) -> None:
    response = staff_client.post(ORGS, action_data("hold", tenants.org_a.pk, tenants.org_b.pk), follow=True)
    assert "Held 2 item(s)." in messages_of(response)
    assert set(Org.objects.values_list("weight", "weight_before_hold")) == {(0, 2), (0, 1)}
    response = staff_client.post(ORGS, action_data("release", tenants.org_a.pk), follow=True)
    assert "Released 1 item(s)." in messages_of(response)
    tenants.org_a.refresh_from_db()
    tenants.org_b.refresh_from_db()
    assert (tenants.org_a.weight, tenants.org_b.weight) == (2, 0)
    assert history(tenants.org_a) == [(STAFF, "hold", "weight 2", "held"), (STAFF, "hold", "held", "weight 2")]


def test_add_an_org_goes_through_the_service(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_add")
    data = change_form_data(staff_client.get(url))
    data.update(name="Gamma", slug="gamma", weight="1", max_concurrency="2")
    data.update({"workflow_costs-TOTAL_FORMS": "1", "workflow_costs-0-workflow": tenants.workflow.pk})
    data["workflow_costs-0-cost"] = "4"
    response = staff_client.post(url, data, follow=True)
    assert response.status_code == 200
    gamma = Org.objects.get(slug="gamma")
    assert (gamma.weight, gamma.max_concurrency, gamma.queue_limit) == (1, 2, None)
    assert WorkflowCost.objects.get(org=gamma).cost == 4
    assert history(gamma) == [(STAFF, "created", "", "weight 1"), (STAFF, "cost:render", "default 1", "4")]


def test_an_org_weight_past_the_service_bound_is_a_form_error(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_add")
    data = change_form_data(staff_client.get(url))
    data.update(name="Huge", slug="huge", weight="10001")
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "Ensure this value is less than or equal to 10000." in response.content.decode()
    assert not Org.objects.filter(slug="huge").exists()


def test_change_form_edits_go_through_the_services(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update(name="Acme Corp", weight="5", max_concurrency="3", queue_limit="100")
    response = staff_client.post(url, data, follow=True)
    assert response.status_code == 200
    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.name, org.weight, org.max_concurrency, org.queue_limit) == ("Acme Corp", 5, 3, 100)
    assert history(org) == [
        (STAFF, "weight", "2", "5"),
        (STAFF, "max_concurrency", "", "3"),
        (STAFF, "queue_limit", "", "100"),
    ]
    # The history is on the page, read-only.
    page = staff_client.get(url).content.decode()
    assert "change history" in page.lower()
    assert 'name="changes-0-field"' not in page


def test_a_hold_made_while_the_form_was_open_survives_a_queue_limit_edit(
    staff_client: Client, tenants: Tenants
) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    services.org_hold(org=tenants.org_a, actor=Actor("user:oscar", staff=True))
    data["queue_limit"] = "50"
    assert staff_client.post(url, data).status_code == 302
    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.weight, org.weight_before_hold, org.queue_limit) == (0, 2, 50)
    assert history(org) == [("user:oscar", "hold", "weight 2", "held"), (STAFF, "queue_limit", "", "50")]


def test_a_name_edit_leaves_a_slug_changed_meanwhile(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    Org.objects.filter(pk=tenants.org_a.pk).update(slug="acme-inc")
    data["name"] = "Acme Corp"
    assert staff_client.post(url, data).status_code == 302
    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.name, org.slug) == ("Acme Corp", "acme-inc")


def test_a_weight_changed_while_the_form_was_open_refuses_the_weight_edit(
    staff_client: Client, tenants: Tenants
) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    services.org_weight_set(org=tenants.org_a, weight=5, actor=Actor("user:oscar", staff=True))
    data.update(weight="3", queue_limit="50")
    response = staff_client.post(url, data)
    assert response.status_code == 200
    errors: Any = response.context["adminform"].form.errors
    assert list(errors) == ["weight"]
    assert "changed by someone else since you opened this page: it is now 5" in errors["weight"][0]
    assert "it is now 5" in response.content.decode()
    org = Org.objects.get(pk=tenants.org_a.pk)
    assert (org.weight, org.queue_limit) == (5, None)
    assert history(org) == [("user:oscar", "weight", "2", "5")]


def test_a_workflow_edit_leaves_a_cost_changed_meanwhile(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_workflow_change", args=[tenants.workflow.pk])
    data = change_form_data(staff_client.get(url))
    services.workflow_change(workflow=tenants.workflow, actor=Actor("user:oscar", staff=True), default_cost=5)
    data["run_timeout"] = "900"
    assert staff_client.post(url, data).status_code == 302
    workflow = Workflow.objects.get(pk=tenants.workflow.pk)
    assert (workflow.default_cost, workflow.run_timeout) == (5, 900)

    data = change_form_data(staff_client.get(url))
    services.workflow_change(workflow=tenants.workflow, actor=Actor("user:oscar", staff=True), default_cost=6)
    data["default_cost"] = "2"
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "it is now 6" in response.context["adminform"].form.errors["default_cost"][0]
    assert Workflow.objects.get(pk=tenants.workflow.pk).default_cost == 6


def test_workflow_cost_inline_add_change_and_delete_go_through_the_service(
    staff_client: Client, tenants: Tenants
) -> None:
    simulate = WorkflowFactory(name="simulate", default_cost=3)
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])

    data = change_form_data(staff_client.get(url))
    data.update({"workflow_costs-TOTAL_FORMS": "1", "workflow_costs-0-workflow": simulate.pk})
    data["workflow_costs-0-cost"] = "5"
    assert staff_client.post(url, data).status_code == 302
    assert WorkflowCost.objects.get(org=tenants.org_a, workflow=simulate).cost == 5

    data = change_form_data(staff_client.get(url))
    data["workflow_costs-0-cost"] = "2"
    assert staff_client.post(url, data).status_code == 302
    assert WorkflowCost.objects.get(org=tenants.org_a, workflow=simulate).cost == 2

    data = change_form_data(staff_client.get(url))
    data["workflow_costs-0-DELETE"] = "on"
    assert staff_client.post(url, data).status_code == 302
    assert not WorkflowCost.objects.exists()

    assert history(tenants.org_a) == [
        (STAFF, "cost:simulate", "default 3", "5"),
        (STAFF, "cost:simulate", "5", "2"),
        (STAFF, "cost:simulate", "2", "default 3"),
    ]


def test_inline_rows_changed_while_the_form_was_open_stay_as_left(staff_client: Client, tenants: Tenants) -> None:
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=4)
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    services.workflow_cost_set(
        org=tenants.org_a, workflow=tenants.workflow, cost=6, actor=Actor("user:oscar", staff=True)
    )
    membership = Membership.objects.get(user=tenants.member_a)
    services.membership_role_set(
        membership=membership, role=Membership.Role.VIEWER, actor=Actor("user:oscar", staff=True)
    )
    data["queue_limit"] = "50"
    assert staff_client.post(url, data).status_code == 302
    assert WorkflowCost.objects.get(org=tenants.org_a).cost == 6
    assert Membership.objects.get(user=tenants.member_a).role == Membership.Role.VIEWER

    data = change_form_data(staff_client.get(url))
    services.workflow_cost_set(
        org=tenants.org_a, workflow=tenants.workflow, cost=7, actor=Actor("user:oscar", staff=True)
    )
    data.update({"workflow_costs-0-cost": "2", "queue_limit": "60"})
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "it is now 7" in response.content.decode()
    assert WorkflowCost.objects.get(org=tenants.org_a).cost == 7
    assert Org.objects.get(pk=tenants.org_a.pk).queue_limit == 50


def test_moving_a_cost_row_to_another_workflow_moves_the_override(staff_client: Client, tenants: Tenants) -> None:
    simulate = WorkflowFactory(name="simulate", default_cost=3)
    WorkflowCost.objects.create(org=tenants.org_a, workflow=tenants.workflow, cost=4)
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data["workflow_costs-0-workflow"] = simulate.pk
    assert staff_client.post(url, data).status_code == 302
    costs = dict(WorkflowCost.objects.filter(org=tenants.org_a).values_list("workflow__name", "cost"))
    assert costs == {"simulate": 4}


def test_a_bad_cost_in_the_inline_is_a_form_error(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update({"workflow_costs-TOTAL_FORMS": "1", "workflow_costs-0-workflow": tenants.workflow.pk})
    data["workflow_costs-0-cost"] = "0"
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert not WorkflowCost.objects.exists()
    assert not OrgChange.objects.exists()


def test_members_are_edited_inline(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_org_change", args=[tenants.org_a.pk])
    data = change_form_data(staff_client.get(url))
    data.update({"memberships-TOTAL_FORMS": "2", "memberships-1-user": tenants.outsider.pk})
    data["memberships-1-role"] = Membership.Role.VIEWER
    assert staff_client.post(url, data).status_code == 302
    assert Membership.objects.get(user=tenants.outsider).org == tenants.org_a
    # Added through `membership_create`, as the API adds members: logged in the org's history.
    assert OrgChange.objects.filter(org=tenants.org_a, field="member", new_value="olga (viewer)").exists()


def test_a_workflow_added_in_the_admin_goes_through_the_service(staff_client: Client, tenants: Tenants) -> None:
    url = reverse("admin:orgs_workflow_add")
    data = {
        "name": "export",
        "workflow_type": "ExportWorkflow",
        "task_queue": "exports",
        "default_cost": "2",
        "params": '{"format": "pdf"}',
        "run_timeout": "",
        "provider": "",
    }
    assert staff_client.post(url, data).status_code == 302
    workflow = Workflow.objects.get(name="export")
    assert (workflow.workflow_type, workflow.default_cost, workflow.params) == ("ExportWorkflow", 2, {"format": "pdf"})

    refused = staff_client.post(url, {**data, "name": "export2", "params": "[1, 2]"}, follow=True)
    assert "params must be an object" in " ".join(messages_of(refused))
    assert not Workflow.objects.filter(name="export2").exists()


def test_workflow_admin_lists_and_announces_a_cost_change(
    staff_client: Client, tenants: Tenants, announced: Any, django_capture_on_commit_callbacks: Any
) -> None:
    assert staff_client.get(reverse("admin:orgs_workflow_changelist")).status_code == 200
    url = reverse("admin:orgs_workflow_change", args=[tenants.workflow.pk])
    data = change_form_data(staff_client.get(url))
    data["default_cost"] = "2"
    with django_capture_on_commit_callbacks(execute=True):
        assert staff_client.post(url, data).status_code == 302
    assert Workflow.objects.get(pk=tenants.workflow.pk).default_cost == 2
    assert announced.replans == 1


def test_provider_pause_add_goes_through_the_service(staff_client: Client, tenants: Tenants) -> None:
    provider = ProviderFactory(slug="geo-api")
    url = reverse("admin:orgs_providerpause_add")
    data = change_form_data(staff_client.get(url))
    until = timezone.localtime() + timedelta(minutes=10)
    data.update(provider=provider.pk, org=tenants.org_a.pk, reason="throttled")
    data.update({"until_0": until.strftime("%Y-%m-%d"), "until_1": until.strftime("%H:%M:%S")})
    assert staff_client.post(url, data).status_code == 302
    pause = ProviderPause.objects.get()
    assert (pause.org, pause.created_by, pause.reason) == (tenants.org_a, STAFF, "throttled")
    assert history(tenants.org_a)[0][:2] == (STAFF, "provider:geo-api")

    changelist = reverse("admin:orgs_providerpause_changelist")
    assert staff_client.get(changelist).status_code == 200
    response = staff_client.post(changelist, action_data("end_now", pause.pk), follow=True)
    assert "Ended 1 item(s)." in messages_of(response)
    pause.refresh_from_db()
    assert pause.until <= timezone.now()


def test_provider_pause_in_the_past_is_a_form_error(staff_client: Client, tenants: Tenants) -> None:
    provider = ProviderFactory(slug="geo-api")
    url = reverse("admin:orgs_providerpause_add")
    data = change_form_data(staff_client.get(url))
    past = timezone.localtime() - timedelta(minutes=10)
    data.update(provider=provider.pk, reason="late")
    data.update({"until_0": past.strftime("%Y-%m-%d"), "until_1": past.strftime("%H:%M:%S")})
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert "until must be in the future" in response.content.decode()
    assert not ProviderPause.objects.exists()


def test_api_tokens_are_listed_and_revoked_in_the_admin(tenants, client) -> None:  # type: ignore[no-untyped-def]
    from orgs.models import ApiToken

    token = ApiToken.objects.create(user=tenants.member_a, org=tenants.org_a, key_hash="a" * 64, prefix="abcd1234")
    client.force_login(tenants.staff)
    page = client.get("/admin/orgs/apitoken/")
    assert page.status_code == 200
    assert b"abcd1234" in page.content
    assert client.get("/admin/orgs/apitoken/add/").status_code == 403
    client.post(f"/admin/orgs/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_a_workflow_s_run_timeout_is_set_in_the_admin(staff_client: Client, tenants: Tenants, settings: Any) -> None:
    settings.FAIRSCHED_RUN_TIMEOUT = 7200
    listing = staff_client.get(reverse("admin:orgs_workflow_changelist")).content.decode()
    assert "7200 (default)" in listing

    url = reverse("admin:orgs_workflow_change", args=[tenants.workflow.pk])
    data = change_form_data(staff_client.get(url))
    data["run_timeout"] = "0"
    refused = staff_client.post(url, data)
    assert refused.status_code == 200  # the form again, with the error
    assert Workflow.objects.get(pk=tenants.workflow.pk).run_timeout is None

    data["run_timeout"] = "900"
    assert staff_client.post(url, data).status_code == 302
    assert Workflow.objects.get(pk=tenants.workflow.pk).run_timeout == 900
    assert ">900<" in staff_client.get(reverse("admin:orgs_workflow_changelist")).content.decode()


@pytest.mark.parametrize("object_id", ["abc", "99999999999999999999999", "999999"])
def test_a_save_of_a_missing_or_malformed_id_is_the_admin_s_redirect(staff_client: Client, object_id: str) -> None:
    response = staff_client.post(f"/admin/orgs/org/{object_id}/change/", {"queue_limit": "5"})
    assert response.status_code == 302
    assert not OrgChange.objects.exists()
