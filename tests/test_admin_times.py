"""Every datetime the admin shows is a `<time>` to the second with its zone named, which the page's
script reads in the viewer's zone: the list columns, read-only fields, inlines and History pages of
every registered model. No page shows a datetime in Django's own format ("March 1, 2026, 11:59 p.m."),
nor as Python prints one."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils.html import escape
from django.utils.text import Truncator

from charts.models import ChartEvent, ChartPlan, DurationStat
from common.actors import Actor
from feed.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.access import api_token_issue
from orgs.models import ProviderPause
from orgs.services import org_hold
from tests.conftest import Tenants
from tests.factories import ChartFactory, ProviderFactory

AT = datetime(2026, 3, 1, 23, 59, 58, tzinfo=UTC)
SHOWN = '<time datetime="2026-03-01T23:59:58+00:00">2026-03-01 23:59:58 UTC</time>'
MONTHS = r"(Jan\.|Feb\.|March|April|May|June|July|Aug\.|Sept\.|Oct\.|Nov\.|Dec\.)"
# Django's DATETIME_FORMAT ("N j, Y, P") and DATE_FORMAT, and a datetime as `str()` or ISO writes it.
BARE = re.compile(rf"{MONTHS} \d{{1,2}}, \d{{4}}|\d{{4}}-\d\d-\d\d[ T]\d\d:\d\d|\d\d?:\d\d (a\.m\.|p\.m\.)")
TIME = re.compile(r"<time datetime=\"([^\"]+)\">([^<]*)</time>")


def text_outside_times(page: str) -> str:
    """The page's text (not its tags' attributes, so not an input's value) with its `<time>`s left out."""
    page = re.sub(r"<script\b.*?</script>", " ", page, flags=re.S)
    page = TIME.sub(" ", page)
    return re.sub(r"<[^>]+>", " ", page)


def every_datetime_at(moment: datetime) -> None:
    """Every datetime column of every model the admin shows (and their inlines' and plans') set to `moment`."""
    shown = {model for model in admin.site._registry} | {ChartEvent, ChartPlan, WebhookAttempt, LogEntry}
    for model in shown:
        fields = [f.name for f in model._meta.concrete_fields if isinstance(f, models.DateTimeField)]
        if fields:
            model._default_manager.all().update(**dict.fromkeys(fields, moment))


@pytest.fixture
def staff_client(tenants: Tenants) -> Client:
    """Signed in before the rows are written: a sign-in clears the sign-in guard's expired logs."""
    client = Client()
    client.force_login(tenants.staff)
    return client


@pytest.fixture
def a_row_of_every_model(tenants: Tenants, staff_client: Client) -> None:
    staff = Actor.operator(tenants.staff)
    org_hold(org=tenants.org_a, actor=staff, reason="invoice overdue")
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="walk-1")
    ChartEvent.objects.create(chart=chart, from_state="queued", to_state="running", actor="system")
    ChartPlan.objects.create(chart=chart, position=0)
    DurationStat.objects.create(org=tenants.org_a, workflow=tenants.workflow, count=1, total_seconds=3.0)
    provider = ProviderFactory()
    ProviderPause.objects.create(provider=provider, until=AT + timedelta(hours=1), reason="throttled")
    api_token_issue(user=tenants.member_a, org=tenants.org_a, name="ci")
    SchedulerConfig.load()
    scheduler_config_set(actor=staff, reason="walk", budget=SchedulerConfig.load().budget + 1)
    endpoint = WebhookEndpoint.objects.create(
        org=tenants.org_a, url="https://hooks.acme.test/fairsched", event_types=["chart.succeeded"], secret="s"
    )
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event_id="e1", event_type="chart.succeeded", body="{}", idempotency_key="k1"
    )
    WebhookAttempt.objects.create(delivery=delivery, number=1, status=500)
    Group.objects.create(name="operators")
    # The sign-in guard's logs (django-axes), as a refused and a kept sign-in leave them.
    where = {"user_agent": "Chromium", "ip_address": "192.0.2.7", "username": "alice", "http_accept": "*/*"}
    AccessAttempt.objects.create(**where, path_info="/accounts/login/", attempt_time=AT, failures_since_start=1)
    AccessLog.objects.create(**where, path_info="/accounts/login/", attempt_time=AT, logout_time=AT)
    AccessFailureLog.objects.create(**where, path_info="/accounts/login/", attempt_time=AT)
    for model in admin.site._registry:
        for row in model._default_manager.all()[:1]:
            LogEntry.objects.create(
                user_id=tenants.staff.pk,
                content_type=ContentType.objects.get_for_model(model),
                object_id=str(row.pk),
                object_repr=str(row)[:200],
                action_flag=CHANGE,
                change_message="walked",
            )
    every_datetime_at(AT)


def named(model: type[models.Model], name: str) -> bool:
    """Whether a page may show `name`, the object's own (its title, its breadcrumbs), as it is: it names
    the zone of the time it holds, or the model is django-axes', whose log rows are named by their time."""
    return model._meta.app_label == "axes" or re.search(r"\d\d:\d\d:\d\d UTC\b", name) is not None


def assert_times_named(path: str, page: str, *, names: list[str]) -> None:
    """`names`: the objects' own names (django-axes names its log rows by their time), left out."""
    text = text_outside_times(page)
    for name in names:
        text = text.replace(escape(name), " ").replace(escape(Truncator(name).words(18, truncate="…")), " ")
    bare = BARE.search(text)
    assert bare is None, f"{path}: a datetime outside a <time>: {bare.group(0)!r}"
    for at, shown in TIME.findall(page):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]{3}", shown), f"{path}: {shown!r}"
        assert datetime.fromisoformat(at).tzinfo is not None, f"{path}: {at!r}"


@pytest.mark.usefixtures("a_row_of_every_model")
def test_every_admin_page_shows_its_datetimes_as_times_in_the_viewers_zone(
    staff_client: Client, tenants: Tenants
) -> None:
    client, user = staff_client, tenants.staff
    walked = []
    for model, model_admin in admin.site._registry.items():
        info = model._meta.app_label, model._meta.model_name
        row = model._default_manager.first()
        assert row is not None, f"the walk needs a row of {model.__name__}"
        datetimes = [f for f in model._meta.concrete_fields if isinstance(f, models.DateTimeField)]
        for name in ("changelist", "change", "history"):
            path = reverse(f"admin:{info[0]}_{info[1]}_{name}", args=[] if name == "changelist" else [row.pk])
            response = client.get(path, follow=True)
            assert response.status_code == 200, path
            page = response.content.decode()
            assert_times_named(path, page, names=[str(row)] if named(model, str(row)) else [])
            walked.append(path)
        # Each datetime the change page shows as text is a time (an editable one is an input).
        change = client.get(reverse(f"admin:{info[0]}_{info[1]}_change", args=[row.pk])).content.decode()
        request = RequestFactory().get("/")
        request.user = user
        shown = set(flatten_fieldsets(model_admin.get_fieldsets(request, row)))
        read_only = set(model_admin.get_readonly_fields(request, row))
        if any(f.name in shown and (f.name in read_only or not f.editable) for f in datetimes):
            assert SHOWN in change, f"{model.__name__}'s change page shows no datetime as a time"
    listed = client.get(reverse("admin:charts_chart_changelist")).content.decode()
    assert listed.count(SHOWN) == 2  # the predicted start and the ETA, display methods
    assert len(walked) == 3 * len(admin.site._registry)


@pytest.mark.usefixtures("a_row_of_every_model")
def test_the_list_of_a_model_field_and_of_a_display_method_both_show_times(staff_client: Client) -> None:
    client = staff_client
    changes = client.get(reverse("admin:knobs_configchange_changelist")).content.decode()
    assert SHOWN in changes  # `at`, a model field
    chart = client.get(reverse("admin:charts_chart_change", args=[ChartPlan.objects.get().chart_id]))
    assert SHOWN in chart.content.decode()  # `eta`, a display method's value on a read-only field
