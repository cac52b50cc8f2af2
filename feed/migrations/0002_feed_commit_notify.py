"""A hint at each commit that wrote to a log the change feed reads: `NOTIFY fairsched_feed` with the
writing transaction's id, from a statement trigger on each of the four logs (`feed.listener` hears it).

PostgreSQL delivers a NOTIFY only when its transaction commits, and drops it on a rollback: the
database's own `on_commit`, for every writer of the logs (services, bulk inserts, raw SQL) without a
line of theirs. A transaction's notifications with one payload are one: one hint per commit."""

from typing import Any

from django.db import migrations

CHANNEL = "fairsched_feed"
FUNCTION = "fairsched_feed_notify"
LOGS = [("charts", "ChartEvent"), ("orgs", "OrgChange"), ("knobs", "ConfigChange"), ("scheduling", "ClearTimeSlip")]


def _tables(apps: Any) -> list[str]:
    return [apps.get_model(app, model)._meta.db_table for app, model in LOGS]


def create(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(
        f"CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN PERFORM pg_notify('{CHANNEL}', pg_current_xact_id()::text); RETURN NULL; END $$"
    )
    for table in _tables(apps):
        schema_editor.execute(
            f'CREATE TRIGGER {FUNCTION} AFTER INSERT ON "{table}" FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()'
        )


def drop(apps: Any, schema_editor: Any) -> None:
    for table in _tables(apps):
        schema_editor.execute(f'DROP TRIGGER IF EXISTS {FUNCTION} ON "{table}"')
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")


class Migration(migrations.Migration):
    dependencies = [
        ("feed", "0001_webhooks"),
        ("charts", "0014_chart_event_txid"),
        ("orgs", "0009_org_change_txid"),
        ("scheduling", "0006_feed_txid_and_clear_time_slip"),
        ("knobs", "0001_initial"),
    ]

    operations = [migrations.RunPython(create, drop)]
