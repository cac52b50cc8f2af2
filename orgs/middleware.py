"""The admin's forms in the signed-in account's zone."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from orgs.context_processors import viewer_zone


class AdminZoneMiddleware:
    """Under /admin/, the signed-in account's zone is the request's current zone (UTC for an account
    without one: the server cannot know the browser's), so Django's datetime widgets show and parse a
    value in it (`common.admin_times.ZonedSplitDateTime` names it beside each). Only there: the API
    answers in UTC with its offsets and the portal and dashboard print UTC for their script, and what
    the admin prints as a `<time>` is in UTC whatever the current zone (`common.admin_times.admin_time`).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith("/admin/"):
            return self.get_response(request)
        zone = str(viewer_zone(request)["viewer_zone"])
        try:
            timezone.activate(zoneinfo.ZoneInfo(zone) if zone else zoneinfo.ZoneInfo("UTC"))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo("UTC"))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
