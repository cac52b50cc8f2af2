"""`manage.py issue_token USERNAME (--org SLUG | --staff)`: create the user if needed, print a new token."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from common.actors import Actor
from orgs.access import api_token_issue
from orgs.models import Membership, Org
from orgs.services import membership_create

# Bad input exits with 2, like a usage error.
USAGE_ERROR = 2
ACTOR = Actor(name="cli:issue_token", staff=True)


class Command(BaseCommand):
    help = (
        "Issue an API token scoped to one org (the user becomes a member if needed) or to staff "
        "(the user must be staff). Creates the user, without a password, if it does not exist. "
        "Prints the token; it is stored only as a digest and cannot be shown again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--org", metavar="SLUG", help="Scope the token to this org.")
        scope.add_argument("--staff", action="store_true", help="Scope the token to staff.")
        parser.add_argument("--name", default="", help="A label for the token.")

    def handle(self, *args: Any, username: str, org: str | None, staff: bool, name: str, **options: Any) -> None:
        username = username.strip()
        if not username:
            raise CommandError("USERNAME must not be empty", returncode=USAGE_ERROR)
        if org is None and not staff:
            raise CommandError(
                "give --org SLUG or --staff: a token is scoped to one org or to staff", returncode=USAGE_ERROR
            )
        User = get_user_model()
        with transaction.atomic():
            target = None
            if org is not None:
                target = Org.objects.filter(slug=org).first()
                if target is None:
                    raise CommandError(f"no org with slug {org!r}", returncode=USAGE_ERROR)
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User(username=username, is_staff=staff)
                user.set_unusable_password()
                try:
                    user.full_clean(exclude=["password"])
                except ValidationError as error:
                    raise CommandError(
                        f"invalid USERNAME: {'; '.join(error.messages)}", returncode=USAGE_ERROR
                    ) from None
                user.save()
            elif staff and not user.is_staff:
                raise CommandError(
                    f"{username} is not staff; make them staff in the admin first", returncode=USAGE_ERROR
                )
            if target is not None and not Membership.objects.filter(user=user, org=target).exists():
                membership_create(user=user, org=target, role=Membership.Role.MEMBER, actor=ACTOR)
            secret = api_token_issue(user=user, org=target, staff=staff, name=name)
        self.stdout.write(secret)
