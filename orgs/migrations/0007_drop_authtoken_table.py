"""DRF's `rest_framework.authtoken` app is no longer installed (API tokens are `orgs.ApiToken`): drop the
table it left behind in databases migrated before, so that no unused token table lingers. Nothing read it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("orgs", "0006_fair_service_rounds")]

    operations = [migrations.RunSQL("DROP TABLE IF EXISTS authtoken_token", reverse_sql=migrations.RunSQL.noop)]
