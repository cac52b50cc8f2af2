# The org's own index on charts is covered by the unique (org, external id) index. Dropping it is all
# the database needs: Django's AlterField would also drop and re-add the foreign key, which checks
# every chart again under an exclusive lock.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('charts', '0007_chart_plan_waiting_reason'),
        ('orgs', '0007_drop_authtoken_table'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "charts_chart_org_id_81ae80ed"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "charts_chart_org_id_81ae80ed" ON "charts_chart" ("org_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='chart',
                    name='org',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='charts', to='orgs.org'),
                ),
            ],
        ),
    ]
