"""Times in the dashboard's partials. The page's script turns every `data-rel` time into "in 4m" /
"3m ago" as soon as a partial lands and every second after; the server writes the UTC clock time, so
a partial reads correctly before that, and the exact time is always in the title."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()
DASH = "\u2013"


@register.simple_tag
def rel(iso: str | None) -> SafeString:
    """A time the page keeps relative (`data-rel`), from an ISO 8601 string; a dash when there is none."""
    if not iso:
        return format_html('<span title="not planned" data-rel="">{}</span>', DASH)
    return format_html('<span title="{}" data-rel="{}">{}</span>', iso, iso, iso[11:19])


@register.simple_tag
def eta(iso: str | None, low: str | None, high: str | None) -> SafeString:
    """The ETA with its p10-p90 band when the plan has one."""
    if not low or not high or low == high:
        return rel(iso)
    band = '{} <small class="band" title="p10-p90: {} to {}">({}{}{})</small>'
    return format_html(band, rel(iso), low, high, rel(low), DASH, rel(high))
