# The plan table is derived data that each replan builds anew: unlogged, it writes no WAL (issue 17).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("charts", "0008_chart_org_index_covered_by_unique"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE charts_chartplan SET UNLOGGED",
            reverse_sql="ALTER TABLE charts_chartplan SET LOGGED",
        ),
    ]
