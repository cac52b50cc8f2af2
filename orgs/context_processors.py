"""What orgs adds to every template's context: the zone the viewer chose to read times in."""

from __future__ import annotations

from django.http import HttpRequest

from orgs.models import ViewerZone


def viewer_zone(request: HttpRequest) -> dict[str, object]:
    """`viewer_zone`: the account's zone ("" when it has none: the browser's own), so that a page's first
    render is in that zone (static/zone.js reads it from the page's head). The user's zone comes loaded
    with the user (`orgs.access.AccountBackend`): no query of its own."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"viewer_zone": ""}
    try:
        return {"viewer_zone": user.viewer_zone.zone}
    except ViewerZone.DoesNotExist:
        return {"viewer_zone": ""}
