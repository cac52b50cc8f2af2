"""The scheduler's configuration and its change log, moved here from the scheduling app.

The tables are renamed, not copied: every row, id, constraint and index stays. The models' content
types are relabelled, so the admin permissions granted on them, and the admin log's entries, follow.
`scheduling.0007` drops the models from scheduling's state.
"""

import common.txid
from django.db import migrations, models

TABLES = [("scheduling_schedulerconfig", "knobs_schedulerconfig"), ("scheduling_configchange", "knobs_configchange")]
MODELS = ["schedulerconfig", "configchange"]


def relabel(apps, source, target):
    """Move the models' content types from app `source` to `target`. A stray one already under `target`
    (a `migrate` that created it before this ran) is deleted first: the permissions and log entries
    hang on the one under `source`."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if ContentType.objects.filter(app_label=source, model=model).exists():
            ContentType.objects.filter(app_label=target, model=model).delete()
            ContentType.objects.filter(app_label=source, model=model).update(app_label=target)


def content_types_forward(apps, schema_editor):
    relabel(apps, "scheduling", "knobs")


def content_types_backward(apps, schema_editor):
    relabel(apps, "knobs", "scheduling")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("scheduling", "0006_feed_txid_and_clear_time_slip"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f"ALTER TABLE {old} RENAME TO {new}", reverse_sql=f"ALTER TABLE {new} RENAME TO {old}"
                )
                for old, new in TABLES
            ],
            state_operations=[
                migrations.CreateModel(
                    name='ConfigChange',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('actor', models.CharField(max_length=200)),
                        ('field', models.CharField(max_length=100)),
                        ('old_value', models.CharField(blank=True, max_length=200)),
                        ('new_value', models.CharField(blank=True, max_length=200)),
                        ('reason', models.CharField(blank=True, max_length=500)),
                        ('at', models.DateTimeField(auto_now_add=True)),
                        ('txid', models.BigIntegerField(db_default=common.txid.CurrentTransactionId(), editable=False)),
                    ],
                    options={
                        'ordering': ['-at', '-id'],
                        'indexes': [models.Index(fields=['txid', 'id'], name='config_change_txid_idx')],
                    },
                ),
                migrations.CreateModel(
                    name='SchedulerConfig',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('budget', models.PositiveIntegerField(default=10, help_text='Cost units that may run at once.')),
                        ('policy', models.CharField(choices=[('round_robin', 'Weighted round robin (by chart)'), ('deficit', 'Deficit round robin (by cost)')], default='round_robin', max_length=16)),
                        ('quantum', models.FloatField(default=1.0, help_text='Deficit credit per unit of weight per round.')),
                        ('aging_step', models.FloatField(blank=True, help_text='Seconds of waiting per +1 priority.', null=True)),
                        ('aging_cap', models.PositiveIntegerField(default=0, help_text='Largest waiting bonus.')),
                        ('replan_interval', models.FloatField(default=5.0, help_text='Seconds between replans.')),
                        ('reconcile_interval', models.FloatField(default=5.0, help_text='Seconds between reconciles.')),
                        ('dispatch_stale_after', models.FloatField(default=60.0, help_text='Seconds after which a claimed chart whose workflow never started is requeued.')),
                        ('max_attempts', models.PositiveIntegerField(default=3, help_text='Runs of a chart before it fails.')),
                        ('backoff_base', models.FloatField(default=10.0, help_text='Seconds of the first retry delay.')),
                        ('backoff_ceiling', models.FloatField(default=600.0, help_text='Longest retry delay in seconds.')),
                        ('retry_budget_share', models.FloatField(default=0.5, help_text='Share of the budget that retries may occupy (0 to 1).')),
                        ('arrival_window', models.FloatField(default=600.0, help_text="Seconds over which the ETAs' arrival forecast forgets: a submission counts e^-1 as much one window later; the last 5 windows are read (0 turns the forecast off).")),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'verbose_name': 'scheduler configuration',
                        'verbose_name_plural': 'scheduler configuration',
                        'constraints': [models.CheckConstraint(condition=models.Q(('id', 1)), name='scheduler_config_singleton'), models.CheckConstraint(condition=models.Q(('budget__gte', 1)), name='scheduler_budget_gte_1'), models.CheckConstraint(condition=models.Q(('quantum__gt', 0)), name='scheduler_quantum_gt_0'), models.CheckConstraint(condition=models.Q(('aging_step__isnull', True), ('aging_step__gt', 0), _connector='OR'), name='scheduler_aging_step_gt_0'), models.CheckConstraint(condition=models.Q(('max_attempts__gte', 1)), name='scheduler_max_attempts_gte_1'), models.CheckConstraint(condition=models.Q(('backoff_base__gte', 0)), name='scheduler_backoff_base_gte_0'), models.CheckConstraint(condition=models.Q(('backoff_ceiling__gte', models.F('backoff_base'))), name='scheduler_backoff_ceiling_gte_base'), models.CheckConstraint(condition=models.Q(('retry_budget_share__gte', 0), ('retry_budget_share__lte', 1)), name='scheduler_retry_share_0_1'), models.CheckConstraint(condition=models.Q(('replan_interval__gt', 0)), name='scheduler_replan_interval_gt_0'), models.CheckConstraint(condition=models.Q(('reconcile_interval__gt', 0)), name='scheduler_reconcile_interval_gt_0'), models.CheckConstraint(condition=models.Q(('arrival_window__gte', 0)), name='scheduler_arrival_window_gte_0')],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_forward, content_types_backward),
    ]
