"""Every datetime the admin shows, as a `<time>` the page's script reads in the viewer's zone.

Django's admin formats a datetime itself ("Dec. 3, 2026, 7:55 a.m.": to the minute, in the server's
zone, unnamed) in three places: a list column of a model's field or of a display method
(`admin_list.display_for_field` / `display_for_value`) and a read-only field of a change page or an
inline (`helpers.AdminReadonlyField`, through `display_for_field` or, for a display method, as the
value itself). `install` puts `admin_time` in each of them, for every registered model, Django's own
(users and groups) included; static/zone.js then shows each one in the viewer's zone, to the second,
the zone named. A page without the script still reads the UTC time with its zone.

A datetime the admin lets one edit is shown and parsed in the request's current zone (the account's,
`orgs.middleware.AdminZoneMiddleware`), named beside the widget (`ZonedSplitDateTime`). A read-only
field whose display method has no value shows the admin's empty value, never "None".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers, options, widgets
from django.contrib.admin.templatetags import admin_list
from django.db import models
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe


def admin_time(at: datetime) -> SafeString:
    """`<time datetime="2026-12-03T07:55:02+00:00">2026-12-03 07:55:02 UTC</time>`."""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return format_html(
        '<time datetime="{}">{} UTC</time>', utc.isoformat(timespec="seconds"), utc.strftime("%Y-%m-%d %H:%M:%S")
    )


class ZonedSplitDateTime(widgets.AdminSplitDateTime):
    """Django's admin date and time inputs, the zone they are read in named after the time's; each input
    has its name for assistive technology (Django labels neither: the field's label names no input)."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        zone = timezone.get_current_timezone_name()
        for subwidget, said in zip(context["widget"]["subwidgets"], ("Date", f"Time, {zone}"), strict=True):
            subwidget["attrs"].setdefault("aria-label", said)
        return context

    def render(self, *args: Any, **kwargs: Any) -> SafeString:
        html = super().render(*args, **kwargs)
        zone = format_html(' <span class="zone-named">{}</span>', timezone.get_current_timezone_name())
        head, closing, tail = html.rpartition("</p>")
        return mark_safe(head + zone + closing + tail) if closing else mark_safe(html + zone)  # noqa: S308


def _timed(display: Callable[..., Any]) -> Callable[..., Any]:
    """`display` (Django's), a datetime given as `admin_time`."""

    @wraps(display)
    def shown(value: Any, *args: Any, **kwargs: Any) -> Any:
        return admin_time(value) if isinstance(value, datetime) else display(value, *args, **kwargs)

    return shown


def _looked_up(lookup: Callable[..., Any]) -> Callable[..., Any]:
    """`lookup_field` (Django's) for a read-only field: a display method's datetime as `admin_time` and
    its None as the admin's empty value (the change page prints a method's value as it is, `str()`)."""

    @wraps(lookup)
    def found(name: Any, obj: Any, model_admin: Any = None) -> Any:
        field, attr, value = lookup(name, obj, model_admin)
        if field is None and isinstance(value, datetime):
            value = admin_time(value)
        elif field is None and value is None and model_admin is not None:
            value = model_admin.get_empty_value_display()
        return field, attr, value

    return found


def install() -> None:
    """Once, when the apps are ready (`orgs.apps`)."""
    if hasattr(admin_list.display_for_field, "__wrapped__"):  # type: ignore[attr-defined]
        return
    admin_list.display_for_field = _timed(admin_list.display_for_field)  # type: ignore[attr-defined]
    admin_list.display_for_value = _timed(admin_list.display_for_value)  # type: ignore[attr-defined]
    helpers.display_for_field = _timed(helpers.display_for_field)  # type: ignore[attr-defined]
    helpers.lookup_field = _looked_up(helpers.lookup_field)  # type: ignore[attr-defined]
    # The defaults every model admin copies when it is made: the inlines' later, the registered ones' before.
    zoned = {"form_class": forms.SplitDateTimeField, "widget": ZonedSplitDateTime}
    defaults: dict[Any, Any] = options.FORMFIELD_FOR_DBFIELD_DEFAULTS
    defaults[models.DateTimeField] = zoned
    for model_admin in admin.site._registry.values():
        overrides: dict[Any, Any] = model_admin.formfield_overrides  # type: ignore[assignment]
        if overrides.get(models.DateTimeField, {}).get("widget") is widgets.AdminSplitDateTime:
            overrides[models.DateTimeField] = dict(zoned)
