"""The data migration that turns the kept service from charts (or cost units) into rounds."""

from __future__ import annotations

import importlib

import pytest
from django.db.models import Model

from common.actors import Actor
from knobs.models import SchedulerConfig
from knobs.services import scheduler_config_set
from orgs.models import Org
from tests.factories import OrgFactory

pytestmark = pytest.mark.django_db
migration = importlib.import_module("orgs.migrations.0006_fair_service_rounds")


class apps:
    """The models as the migration names them: the configuration was scheduling's then (knobs' now,
    the same table renamed)."""

    @staticmethod
    def get_model(app_label: str, name: str) -> type[Model]:
        return {("orgs", "Org"): Org, ("scheduling", "SchedulerConfig"): SchedulerConfig}[app_label, name]


def test_round_robin_service_is_divided_by_the_weight() -> None:
    heavy = OrgFactory(weight=4, served=12.0)
    held = OrgFactory(weight=0, weight_before_hold=3, served=9.0)
    idle = OrgFactory(weight=2, served=0.0)

    migration.served_in_rounds(apps, None)

    assert {org.pk: org.served for org in Org.objects.all()} == {heavy.pk: 3.0, held.pk: 3.0, idle.pk: 0.0}


def test_deficit_service_is_divided_by_weight_and_quantum_and_back() -> None:
    scheduler_config_set(actor=Actor("user:test", staff=True), policy="deficit", quantum=2.5)
    org = OrgFactory(weight=2, served=10.0)

    migration.served_in_rounds(apps, None)
    org.refresh_from_db()
    assert org.served == 2.0

    migration.served_in_units(apps, None)
    org.refresh_from_db()
    assert org.served == 10.0
