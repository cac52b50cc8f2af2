"""Serializers whose output fields are built once per class answer exactly as DRF builds them per object."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers

from charts.selectors import chart_get
from charts.serializers import ChartDetailSerializer, ChartLeverSerializer, ChartSerializer
from common.outputs import OutputFieldsOnce
from tests.conftest import Tenants
from tests.factories import ChartFactory

pytestmark = pytest.mark.django_db


def drf_output(serializer: serializers.Serializer[Any], instance: Any) -> dict[str, Any]:
    """What DRF's own `to_representation` gives, fields built for this object."""
    return dict(serializers.Serializer.to_representation(serializer, instance))


@pytest.mark.parametrize("planned", [True, False])
def test_chart_output_is_drfs_own(tenants: Tenants, planned: bool) -> None:
    now = timezone.now()
    plan = {"position": 3, "predicted_start": now, "eta": now + timedelta(minutes=2)} if planned else {}
    chart = ChartFactory(
        org=tenants.org_a,
        workflow=tenants.workflow,
        payload={"file": "a.pdf", "n": [1, 2.5, None]},
        last_error="boom\n  at /srv/secret.py",
        **plan,
    )
    chart = chart_get(org_ids=None, chart_id=chart.pk)
    for serializer_class in (ChartSerializer, ChartDetailSerializer):
        answer = serializer_class(chart).data
        assert answer == drf_output(serializer_class(chart), chart)
    assert answer["last_error"] == "boom"
    assert answer["position"] == (3 if planned else None)
    assert answer["eta_low"] is None
    assert list(ChartSerializer([chart, chart], many=True).data) == [drf_output(ChartSerializer(chart), chart)] * 2


def test_a_method_field_reads_the_context_of_the_serializer_at_hand(tenants: Tenants) -> None:
    chart = chart_get(org_ids=None, chart_id=ChartFactory(org=tenants.org_a, workflow=tenants.workflow).pk)
    assert ChartLeverSerializer(chart, context={"replanning": True}).data["replanning"] is True
    assert ChartLeverSerializer(chart, context={"replanning": False}).data["replanning"] is False
    lever = ChartLeverSerializer(chart, context={"replanning": False})
    assert lever.data == drf_output(lever, chart)


def test_a_field_that_reads_the_context_is_refused() -> None:
    class Nested(OutputFieldsOnce, serializers.Serializer[Any]):
        inner = ChartSerializer()

    with pytest.raises(TypeError, match=r"Nested\.inner reads the context"):
        Nested.output_fields()
