"""Glue between the admin and the services: service errors become admin messages, not 500s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.contrib import admin, messages
from django.db.models import Model
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from common.errors import ServiceError

T = TypeVar("T")
M = TypeVar("M", bound=Model)


class ServiceModelAdmin(admin.ModelAdmin[M]):
    """An admin whose saves call services: a refusal undoes the whole save and says why.

    `save_model` and `save_formset` let a `ServiceError` propagate. The admin runs a save in one
    transaction, so nothing of it is written; the user goes back to the page with the service's reason,
    never a "saved successfully" for a change that was refused.
    """

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ServiceError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except ServiceError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


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
