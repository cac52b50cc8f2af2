"""The replan records an org's clear-time slip (the change feed's `org.clear_time_slipped`) when a new
backlog pushes the clear-time later than the previous replan predicted, by more than the share."""

from __future__ import annotations

import pytest

from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from knobs.services import scheduler_config_set
from orgs.models import Org
from scheduling.models import ClearTimeSlip
from scheduling.replan import plan_refresh
from tests.factories import OrgFactory, WorkflowFactory

pytestmark = pytest.mark.django_db
ACTOR = Actor("user:test", staff=True)


def test_a_burst_ahead_of_an_org_is_a_slip_and_a_quiet_replan_is_not(settings: object) -> None:
    scheduler_config_set(actor=ACTOR, budget=1)
    WorkflowFactory(name="w")
    acme, beta = OrgFactory(slug="acme", weight=1), OrgFactory(slug="beta", weight=1)
    chart_submit_bulk(org=acme, items=[ChartRequest("w", f"a{i}") for i in range(3)], actor=ACTOR)
    plan_refresh()
    plan_refresh()
    assert not ClearTimeSlip.objects.exists()  # nothing changed: the same clear-time

    before = Org.objects.get(pk=acme.pk).clear_at
    chart_submit_bulk(org=beta, items=[ChartRequest("w", f"b{i}") for i in range(20)], actor=ACTOR)
    plan_refresh()
    after = Org.objects.get(pk=acme.pk).clear_at
    assert before is not None
    assert after is not None
    assert after > before
    (slip,) = ClearTimeSlip.objects.all()
    assert (slip.org_id, slip.clear_before, slip.clear_at) == (acme.pk, before, after)
