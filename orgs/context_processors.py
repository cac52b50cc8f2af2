"""What orgs adds to every template's context: the zone the viewer chose to read times in."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from orgs.selectors import viewer_zone as viewer_zone_of


def viewer_zone(request: HttpRequest) -> dict[str, object]:
    """`viewer_zone`: the account's zone ("" when it has none: the browser's own), read only by a page
    that shows it, so that the page's first render is in that zone (static/zone.js reads it there)."""
    user = getattr(request, "user", None)
    user_id = user.pk if user is not None and user.is_authenticated else None
    return {"viewer_zone": SimpleLazyObject(lambda: viewer_zone_of(user_id=user_id) or "")}
