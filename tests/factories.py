"""Factories that build rows for tests; services are still the way tests change state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from charts.models import PLAN_FIELDS, Chart, ChartPlan
from orgs.models import Membership, Org, Provider, Workflow


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests-1")


class OrgFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Org

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")
    weight = 1


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    org = factory.SubFactory(OrgFactory)
    role = Membership.Role.MEMBER


class ProviderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Provider
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"provider-{n}")
    name = factory.LazyAttribute(lambda p: p.slug)


class WorkflowFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workflow
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"workflow-{n}")
    workflow_type = "fairsched.demo"
    task_queue = "fairsched-test"
    default_cost = 1
    params: Any = factory.LazyFunction(lambda: {"duration": 0.2})


class ChartFactory(factory.django.DjangoModelFactory):
    """A chart; plan fields given to it (`position=3`, `eta=...`) go to its `ChartPlan` row."""

    class Meta:
        model = Chart

    org = factory.SubFactory(OrgFactory)
    workflow = factory.SubFactory(WorkflowFactory)
    external_id = factory.Sequence(lambda n: f"ext-{n}")

    @classmethod
    def _create(cls, model_class: type[Chart], *args: Any, **kwargs: Any) -> Chart:
        plan = {name: kwargs.pop(name) for name in PLAN_FIELDS if name in kwargs}
        chart: Chart = super()._create(model_class, *args, **kwargs)
        if plan:
            ChartPlan.objects.create(chart=chart, **plan)
            for name, value in plan.items():
                setattr(chart, name, value)
        return chart


def charts_with_bands(
    org: Org,
    workflow: Workflow | None = None,
    *,
    minutes: Sequence[int] = (3, 6, 12),
    early: int = 1,
    late: int = 3,
    each: Callable[[int], dict[str, Any]] = lambda minutes: {},
) -> list[Chart]:
    """A chart of `org` for each of `minutes`, its ETA that many minutes from now and its band from
    `early` minutes before to `late` after (what the drain plot and the banded ETAs of the pages read);
    `each(minutes)` gives a chart's other fields."""
    now = timezone.now()
    given = {} if workflow is None else {"workflow": workflow}
    return [
        ChartFactory(
            org=org,
            eta=now + timedelta(minutes=at),
            eta_low=now + timedelta(minutes=at - early),
            eta_high=now + timedelta(minutes=at + late),
            **given,
            **each(at),
        )
        for at in minutes
    ]
