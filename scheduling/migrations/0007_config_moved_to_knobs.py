"""The scheduler's configuration and its change log now belong to the knobs app (`knobs.0001`, which
renames their tables): only scheduling's state forgets them, no table is dropped."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("knobs", "0001_initial"),
        ("scheduling", "0006_feed_txid_and_clear_time_slip"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ConfigChange"),
                migrations.DeleteModel(name="SchedulerConfig"),
            ],
        ),
    ]
