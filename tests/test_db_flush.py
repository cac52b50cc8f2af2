"""The test database's flush (tests/db_flush.py): DELETE empties every table as TRUNCATE did, rows
tied by foreign keys included, the content types and permissions are as post_migrate writes them,
and a flush that resets sequences keeps Django's TRUNCATE."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

from charts.models import Chart, ChartEvent
from tests.conftest import Announcements, Tenants
from tests.db_flush import KEPT_TABLES
from tests.factories import ChartFactory


@pytest.mark.django_db(transaction=True)
def test_a_flush_empties_every_table_rows_tied_by_foreign_keys_included(
    tenants: Tenants, announced: Announcements
) -> None:
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow)
    ChartEvent.objects.create(chart=chart, from_state="", to_state=chart.state, actor="test")
    assert Chart.objects.exists()

    call_command("flush", verbosity=0, interactive=False)

    left = {model._meta.db_table: model._default_manager.count() for model in apps.get_models()}
    assert {table: rows for table, rows in left.items() if rows and table not in KEPT_TABLES} == {}
    models = {(model._meta.app_label, model._meta.model_name) for model in apps.get_models()}
    assert set(ContentType.objects.values_list("app_label", "model")) == models
    codenames = set(Permission.objects.values_list("codename", flat=True))
    for model in apps.get_models():
        assert {f"{action}_{model._meta.model_name}" for action in model._meta.default_permissions} <= codenames


def test_the_flush_deletes_and_a_sequence_reset_still_truncates() -> None:
    tables = ["charts_chart", "django_content_type", "orgs_org"]

    assert connection.ops.sql_flush(no_style(), tables) == ['DELETE FROM "charts_chart";', 'DELETE FROM "orgs_org";']
    assert connection.ops.sql_flush(no_style(), tables, reset_sequences=True) == [
        'TRUNCATE "charts_chart", "django_content_type", "orgs_org" RESTART IDENTITY;'
    ]
