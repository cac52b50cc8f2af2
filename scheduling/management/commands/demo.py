"""`manage.py demo [--charts N] [--reset]`: a demo to look at, created idempotently.

An admin superuser, five orgs that show off the scheduler (different weights, a cap, a hold, a trickle),
a customer login per org, a throttling provider, four workflows with different costs and durations,
per-org cost overrides, a small budget and a backlog submitted through the services, as a client would.
Running it again adds nothing that exists already; `--reset` deletes the demo orgs and their charts
first and starts over.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from charts.models import Chart, DurationStat
from charts.services import ChartRequest, chart_submit_bulk
from common.actors import Actor
from common.errors import ServiceError
from knobs.services import scheduler_config_set
from orgs import services
from orgs.models import Membership, Org, Workflow

ACTOR = Actor.system("demo")
ADMIN_USERNAME = "admin"
ADMIN_URL = "http://127.0.0.1:8000/admin/"
PORTAL_URL = "http://127.0.0.1:8000/portal/"
BATCH = 1000


@dataclass(frozen=True)
class DemoOrg:
    slug: str
    name: str
    weight: int  # of a held org: the weight a release restores
    share: float  # of --charts
    max_concurrency: int | None = None
    queue_limit: int | None = None
    held: bool = False
    fixed: int | None = None  # a fixed number of charts instead of a share
    turnaround: int | None = None  # seconds in which its charts are promised (None: no promise)
    turnaround_share: float | None = None


@dataclass(frozen=True)
class DemoWorkflow:
    name: str
    cost: int
    duration: float
    fail_probability: float = 0.0
    provider: str | None = None
    mix: int = 1  # how often it appears in a backlog, relative to the others


ORGS = [
    # Acme's big backlog cannot all make its 10 minutes (some of it is at risk); Beta's half hour is easy.
    DemoOrg("acme", "Acme Corp", weight=3, share=1.0, turnaround=600, turnaround_share=0.9),
    DemoOrg("beta", "Beta Labs", weight=2, share=0.2, turnaround=1800, turnaround_share=0.95),
    DemoOrg("gamma", "Gamma Studio", weight=1, share=1 / 6, max_concurrency=2),
    DemoOrg("delta", "Delta Freight", weight=2, share=1 / 15, held=True),
    DemoOrg("epsilon", "Epsilon Solo", weight=1, share=0, queue_limit=25, fixed=5),
]
WORKFLOWS = [
    DemoWorkflow("render", cost=1, duration=8, mix=5),
    DemoWorkflow("simulate", cost=3, duration=20, mix=2),
    DemoWorkflow("export", cost=1, duration=4, provider="geo-api", mix=2),
    DemoWorkflow("flaky", cost=1, duration=6, fail_probability=0.3, mix=1),
]
# (org, workflow) -> cost: Acme negotiated cheaper simulations, Beta's exports are heavier.
COST_OVERRIDES = {("acme", "simulate"): 2, ("beta", "export"): 2}
# (org, workflow) -> seconds: Gamma promises its simulations within 20 minutes (and nothing else).
TURNAROUND_OVERRIDES = {("gamma", "simulate"): 1200}
CONFIG: dict[str, Any] = {"budget": 8, "max_attempts": 3, "backoff_base": 5}


class Command(BaseCommand):
    help = "Create the demo (admin, orgs, customers, workflows, a backlog) if it is not there; print the logins."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--charts", type=int, default=300, help="Backlog of the biggest org (acme); others get shares of it."
        )
        parser.add_argument("--reset", action="store_true", help="Delete the demo orgs and their charts first.")

    def handle(self, *args: Any, charts: int, reset: bool, **options: Any) -> None:
        """In one transaction:
        1. (--reset) delete the demo orgs, their charts and history.
        2. Create what is missing: the admin, the provider, the workflows, the orgs with their cost
           overrides, turnaround promises and holds, a customer per org.
        3. On a fresh demo, set the scheduler's budget and retry policy.
        4. Submit each org's backlog through `chart_submit_bulk`; charts that exist are left as they are.
        Then print the URLs and the logins.
        """
        if charts < 0:
            raise CommandError("--charts must be >= 0")
        try:
            with transaction.atomic():
                if reset:
                    self._reset()
                fresh = not Org.objects.filter(slug=ORGS[0].slug).exists()
                admin_line = self._admin()
                workflows = self._workflows(restore=reset)
                orgs = {spec.slug: self._org(spec, workflows) for spec in ORGS}
                if fresh:
                    scheduler_config_set(actor=ACTOR, **CONFIG)
                customer_lines = self._customers(orgs)
                submitted = sum(self._backlog(orgs[spec.slug], spec, charts) for spec in ORGS)
        except ServiceError as error:
            raise CommandError(f"the demo was refused, nothing was written: {error.message}") from error

        total = Chart.objects.filter(org__slug__in=[spec.slug for spec in ORGS]).count()
        self.stdout.write(
            f"Demo ready: {len(ORGS)} orgs, {len(WORKFLOWS)} workflows, {total} charts ({submitted} new)."
        )
        self.stdout.write(f"Admin:  {ADMIN_URL}  {admin_line}")
        self.stdout.write(f"Portal: {PORTAL_URL}")
        for line in customer_lines:
            self.stdout.write(f"  {line}")

    def _reset(self) -> None:
        slugs = [spec.slug for spec in ORGS]
        # Charts protect their org, so they go first; their events cascade with them, and the orgs take
        # their memberships, costs, pauses and history along.
        Chart.objects.filter(org__slug__in=slugs).delete()
        DurationStat.objects.filter(org__slug__in=slugs).delete()
        Org.objects.filter(slug__in=slugs).delete()
        self.stdout.write("Reset: deleted the demo orgs and their charts.")

    def _admin(self) -> str:
        users = get_user_model()
        if users.objects.filter(username=ADMIN_USERNAME).exists():
            return f"user {ADMIN_USERNAME} exists already (its password is unchanged)"
        password = os.environ.get("FAIRSCHED_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser(username=ADMIN_USERNAME, email="admin@example.com", password=password)
        return f"user {ADMIN_USERNAME}  password {password}"

    def _workflows(self, *, restore: bool) -> dict[str, Workflow]:
        """Create the demo workflows that are missing; `restore` also resets those that exist."""
        workflows = {}
        for spec in WORKFLOWS:
            definition = {
                "workflow_type": "fairsched.demo",
                "task_queue": settings.TEMPORAL_TASK_QUEUE,
                "default_cost": spec.cost,
                # The first ETAs, before any run has finished, come from this (not the 60 s default).
                "initial_duration": max(1, round(spec.duration)),
                "params": {"duration": spec.duration, "fail_probability": spec.fail_probability},
                "provider": services.provider_get_or_create(slug=spec.provider) if spec.provider else None,
            }
            if restore:
                workflows[spec.name], _ = Workflow.objects.update_or_create(name=spec.name, defaults=definition)
            else:
                workflows[spec.name], _ = Workflow.objects.get_or_create(name=spec.name, defaults=definition)
        return workflows

    def _org(self, spec: DemoOrg, workflows: dict[str, Workflow]) -> Org:
        """The org as the demo made it, or as account managers have changed it since."""
        org = Org.objects.filter(slug=spec.slug).first()
        if org is not None:
            return org
        org = services.org_create(
            name=spec.name,
            slug=spec.slug,
            weight=spec.weight,
            max_concurrency=spec.max_concurrency,
            queue_limit=spec.queue_limit,
            actor=ACTOR,
        )
        for (slug, name), cost in COST_OVERRIDES.items():
            if slug == spec.slug:
                services.workflow_cost_set(org=org, workflow=workflows[name], cost=cost, actor=ACTOR)
        # Promised before its backlog is submitted: each of its charts is due by its promise.
        if spec.turnaround is not None:
            org = services.org_turnaround_set(org=org, turnaround=spec.turnaround, actor=ACTOR)
            org = services.org_turnaround_share_set(org=org, share=spec.turnaround_share, actor=ACTOR)
        for (slug, name), seconds in TURNAROUND_OVERRIDES.items():
            if slug == spec.slug:
                services.workflow_turnaround_set(org=org, workflow=workflows[name], turnaround=seconds, actor=ACTOR)
        if spec.held:  # held through the service, so that a release restores its weight
            org = services.org_hold(org=org, actor=ACTOR, reason="demo: a held org keeps its queue")
        return org

    def _customers(self, orgs: dict[str, Org]) -> list[str]:
        """One member per org; a password is printed only for users created now."""
        users = get_user_model()
        password = os.environ.get("FAIRSCHED_CUSTOMER_PASSWORD") or secrets.token_urlsafe(9)
        lines = []
        for slug, org in orgs.items():
            username = f"{slug}-customer"
            user = users.objects.filter(username=username).first()
            if user is None:
                user = users.objects.create_user(username=username, email=f"{username}@example.com", password=password)
                lines.append(f"customer of {org.name}: user {username}  password {password}")
            else:
                lines.append(f"customer of {org.name}: user {username} exists already (password unchanged)")
            Membership.objects.get_or_create(user=user, org=org, defaults={"role": Membership.Role.MEMBER})
        return lines

    def _backlog(self, org: Org, spec: DemoOrg, charts: int) -> int:
        """Submit the org's backlog in batches; returns how many charts were new."""
        count = spec.fixed if spec.fixed is not None else round(charts * spec.share)
        new = 0
        for batch in _batches(_submissions(spec.slug, count), BATCH):
            new += sum(created for _, created in chart_submit_bulk(org=org, items=batch, actor=ACTOR))
        return new


def _submissions(slug: str, count: int) -> Iterator[ChartRequest]:
    """The same backlog every time for one org: the workflows mixed by `mix`, a few high priority."""
    draw = random.Random(slug)  # a reproducible mix
    names = [spec.name for spec in WORKFLOWS]
    mix = [spec.mix for spec in WORKFLOWS]
    for index in range(count):
        yield ChartRequest(
            workflow=draw.choices(names, weights=mix)[0],
            external_id=f"{slug}-{index + 1:05d}",
            payload={"demo": True, "n": index + 1},
            high_priority=index % 50 == 49,
        )


def _batches(items: Iterator[ChartRequest], size: int) -> Iterator[list[ChartRequest]]:
    batch: list[ChartRequest] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
