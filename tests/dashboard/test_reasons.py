"""The dashboard's partials: the events show every lever's reason; a held org's row tells what its
members read; the org rows and the scheduler's forms carry the ETag of the values they show, the one
the API's read answers (the page's edits send it back as If-Match)."""

from __future__ import annotations

import re

from django.test import Client

from charts.services import chart_pause
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.services import org_cap_set, org_hold
from tests.conftest import Tenants
from tests.factories import ChartFactory


def test_the_events_show_each_lever_s_reason(staff_client: Client, tenants: Tenants) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, external_id="a-1")
    org_cap_set(org=tenants.org_a, max_concurrency=2, actor=Actor("user:ops", staff=True), reason="cost overrun")
    scheduler_config_set(actor=Actor("user:ops", staff=True), reason="Black Friday", budget=30)
    chart_pause(chart=chart, actor=Actor("user:ops", staff=True), reason="disk full")

    html = staff_client.get("/dashboard/partials/?names=events").content.decode()

    for reason in ("cost overrun", "Black Friday", "disk full"):
        assert f" · {reason}</span>" in html


def test_a_held_row_tells_what_its_members_read(staff_client: Client, tenants: Tenants) -> None:
    org_hold(org=tenants.org_b, actor=Actor("user:ops", staff=True), reason='Migrating <your> "data"')

    html = staff_client.get("/dashboard/partials/?names=orgs").content.decode()

    assert 'title="release restores weight 1; its members read: Migrating &lt;your&gt; &quot;data&quot;"' in html


def test_the_rows_and_forms_carry_the_api_s_etags(staff_client: Client, tenants: Tenants) -> None:
    rows = staff_client.get("/dashboard/partials/?names=orgs").content.decode()
    config = staff_client.get("/dashboard/partials/?names=config").content.decode()

    row_etag = re.search(r'data-org="acme"[^>]* data-etag="([^"]+)"', rows)
    assert row_etag is not None
    assert row_etag.group(1).replace("&quot;", '"') == staff_client.get("/api/v1/orgs/acme/")["ETag"]
    form_etags = set(re.findall(r'data-etag="([^"]+)"', config))
    assert {tag.replace("&quot;", '"') for tag in form_etags} == {staff_client.get("/api/v1/scheduler/config/")["ETag"]}
    assert config.count('data-reason-from="#config-reason"') == 3
