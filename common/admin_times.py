"""Every datetime the admin shows, as a `<time>` the page's script reads in the viewer's zone.

Django's admin formats a datetime itself ("Dec. 3, 2026, 7:55 a.m.": to the minute, in the server's
zone, unnamed) in three places: a list column of a model's field or of a display method
(`admin_list.display_for_field` / `display_for_value`) and a read-only field of a change page or an
inline (`helpers.AdminReadonlyField`, through `display_for_field` or, for a display method, as the
value itself). `install` puts `admin_time` in each of them, for every registered model, Django's own
(users and groups) included; static/zone.js then shows each one in the viewer's zone, to the second,
the zone named. A page without the script still reads the UTC time with its zone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django.contrib.admin import helpers
from django.contrib.admin.templatetags import admin_list
from django.utils.html import format_html
from django.utils.safestring import SafeString


def admin_time(at: datetime) -> SafeString:
    """`<time datetime="2026-12-03T07:55:02+00:00">2026-12-03 07:55:02 UTC</time>`."""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return format_html(
        '<time datetime="{}">{} UTC</time>', utc.isoformat(timespec="seconds"), utc.strftime("%Y-%m-%d %H:%M:%S")
    )


def _timed(display: Callable[..., Any]) -> Callable[..., Any]:
    """`display` (Django's), a datetime given as `admin_time`."""

    @wraps(display)
    def shown(value: Any, *args: Any, **kwargs: Any) -> Any:
        return admin_time(value) if isinstance(value, datetime) else display(value, *args, **kwargs)

    return shown


def _looked_up(lookup: Callable[..., Any]) -> Callable[..., Any]:
    """`lookup_field` (Django's) for a read-only field: a display method's datetime as `admin_time`
    (the change page prints a method's value as it is, `str(datetime)`)."""

    @wraps(lookup)
    def found(*args: Any, **kwargs: Any) -> Any:
        field, attr, value = lookup(*args, **kwargs)
        return field, attr, admin_time(value) if field is None and isinstance(value, datetime) else value

    return found


def install() -> None:
    """Once, when the apps are ready (`orgs.apps`)."""
    if hasattr(admin_list.display_for_field, "__wrapped__"):  # type: ignore[attr-defined]
        return
    admin_list.display_for_field = _timed(admin_list.display_for_field)  # type: ignore[attr-defined]
    admin_list.display_for_value = _timed(admin_list.display_for_value)  # type: ignore[attr-defined]
    helpers.display_for_field = _timed(helpers.display_for_field)  # type: ignore[attr-defined]
    helpers.lookup_field = _looked_up(helpers.lookup_field)  # type: ignore[attr-defined]
