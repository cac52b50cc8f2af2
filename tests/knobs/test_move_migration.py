"""The move of the scheduler's configuration from scheduling to knobs keeps the data: on a database
holding rows, migrating forward keeps every row, id and permission, and migrating back restores them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.apps.registry import Apps
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scheduling", "0006_feed_txid_and_clear_time_slip"), ("knobs", None)]
AFTER = [("scheduling", "0007_config_moved_to_knobs"), ("knobs", "0001_initial")]


def migrate(targets: list[tuple[str, str | None]]) -> Apps:
    """Migrate the test database to `targets`; the models as they stand there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)  # type: ignore[arg-type]
    executor.loader.build_graph()
    return executor.loader.project_state([target for target in targets if target[1] is not None]).apps


@pytest.fixture
def before_the_move() -> Iterator[Apps]:
    """The scheduling app's models, with a configuration, two changes and a group allowed to edit it."""
    old = migrate(BEFORE)
    yield old
    # Every app back to its latest migration, not only these two: going back to BEFORE also unapplied
    # the migrations that depend on knobs (the feed's trigger), which a later test would miss.
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def tables() -> set[str]:
    return set(connection.introspection.table_names())


def test_the_move_keeps_rows_ids_and_permissions(before_the_move: Apps) -> None:
    old = before_the_move
    assert {"scheduling_schedulerconfig", "scheduling_configchange"} <= tables()
    old.get_model("scheduling", "SchedulerConfig").objects.create(id=1, budget=7, policy="deficit", quantum=2.5)
    OldChange = old.get_model("scheduling", "ConfigChange")
    first = OldChange.objects.create(actor="user:ops", field="budget", old_value="10", new_value="7", reason="r")
    second = OldChange.objects.create(actor="user:ops", field="policy", old_value="round_robin", new_value="deficit")
    old_type = ContentType.objects.get(app_label="scheduling", model="schedulerconfig")
    editors = Group.objects.create(name="editors")
    editors.permissions.add(Permission.objects.get(content_type=old_type, codename="change_schedulerconfig"))

    new = migrate(AFTER)  # the models as they were then (later migrations add columns)
    SchedulerConfig, ConfigChange = (new.get_model("knobs", name) for name in ("SchedulerConfig", "ConfigChange"))

    assert not {"scheduling_schedulerconfig", "scheduling_configchange"} & tables()
    config = SchedulerConfig.objects.get()
    assert (config.id, config.budget, config.policy, config.quantum) == (1, 7, "deficit", 2.5)
    assert [(change.id, change.field, change.reason) for change in ConfigChange.objects.order_by("id")] == [
        (first.id, "budget", "r"),
        (second.id, "policy", ""),
    ]
    assert ConfigChange.objects.create(actor="user:ops", field="quantum").id > second.id  # the ids go on
    assert ContentType.objects.get_for_model(SchedulerConfig).pk == old_type.pk
    assert not ContentType.objects.filter(app_label="scheduling", model__in=["schedulerconfig", "configchange"])
    assert Group.objects.get(name="editors").permissions.get().content_type.app_label == "knobs"
    with pytest.raises(IntegrityError), transaction.atomic():  # the constraints came along
        SchedulerConfig.objects.create(id=2)


def test_migrating_back_restores_the_scheduling_tables(before_the_move: Apps) -> None:
    new = migrate(AFTER)
    SchedulerConfig, ConfigChange = (new.get_model("knobs", name) for name in ("SchedulerConfig", "ConfigChange"))
    SchedulerConfig.objects.create(id=1, budget=4)
    ConfigChange.objects.create(actor="user:ops", field="budget", old_value="10", new_value="4")

    old = migrate(BEFORE)

    assert not {"knobs_schedulerconfig", "knobs_configchange"} & tables()
    assert old.get_model("scheduling", "SchedulerConfig").objects.get().budget == 4
    assert old.get_model("scheduling", "ConfigChange").objects.get().new_value == "4"
    assert ContentType.objects.filter(app_label="scheduling", model="configchange").exists()
    assert not ContentType.objects.filter(app_label="knobs").exists()
