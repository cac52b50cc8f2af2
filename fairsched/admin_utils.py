"""Glue between the admin and the services: service errors become admin messages, not 500s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.contrib import admin, messages
from django.http import HttpRequest

from fairsched.errors import ServiceError

T = TypeVar("T")


def apply_each(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    objects: Iterable[T],
    action: Callable[[T], object],
    verb: str,
) -> None:
    """Run a service on every selected object; report how many succeeded and each refusal by name."""
    done = 0
    for obj in objects:
        try:
            action(obj)
        except ServiceError as error:
            model_admin.message_user(request, f"{obj}: {error.message}", messages.ERROR)
        else:
            done += 1
    if done:
        model_admin.message_user(request, f"{verb} {done} item(s).", messages.SUCCESS)
