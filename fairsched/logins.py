"""Login throttling (django-axes): what a locked-out client is told.

Every login form (the admin's, which the dashboard uses, and the portal's) authenticates through
Django's `authenticate`, where axes counts failures per username and per address in the database.
After `FAIRSCHED_LOGIN_FAILURES` failures in a row either one is locked out for
`FAIRSCHED_LOGIN_COOLOFF_MINUTES`; a successful login resets the count.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """429 with Retry-After and a page that says why and for how long."""
    cooloff = settings.AXES_COOLOFF_TIME
    minutes = max(1, round(cooloff.total_seconds() / 60))
    response = render(
        request,
        "registration/locked_out.html",
        {"minutes": minutes, "failures": settings.AXES_FAILURE_LIMIT},
        status=429,
    )
    response["Retry-After"] = str(int(cooloff.total_seconds()))
    return response
