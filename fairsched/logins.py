"""Login throttling (django-axes): who is locked out, and what a locked-out client is told.

Every login form (the admin's, which the dashboard uses, and the portal's) authenticates through
Django's `authenticate`, where axes counts failures in the database per (username, address) and per
address (`AXES_LOCKOUT_PARAMETERS`), never per username alone: whoever knows a username cannot lock
its owner out from elsewhere. `FAIRSCHED_LOGIN_FAILURES` failures for one username from one address
lock that pair out, `FAIRSCHED_LOGIN_ADDRESS_FAILURES` from one address (any usernames) lock the
address out, for `FAIRSCHED_LOGIN_COOLOFF_MINUTES`; a successful login resets the counts.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
from django.db.models import QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class PairAndAddressHandler(AxesDatabaseHandler):
    """Axes' database handler with a threshold of its own for the address.

    Axes has one failure limit, compared with the largest count among the lockout parameters, both
    when a failure is recorded and when a login is let in. Here `get_failures` answers that comparison
    for two thresholds: the (username, address) pair's failures count against `AXES_FAILURE_LIMIT` as
    they are; once the address's failures reach `FAIRSCHED_LOGIN_ADDRESS_FAILURES`, it answers that
    limit, so the address is locked out whoever logs in from it.

    A successful login resets the pair's count only: were it to reset the address's too, whoever has
    an account would wipe the address's count by logging in between guesses at others' passwords.
    """

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        pair, address = self.get_user_attempts(request, credentials)
        pair_failures = _failures(pair)
        if _failures(address) >= settings.FAIRSCHED_LOGIN_ADDRESS_FAILURES:
            return max(pair_failures, settings.AXES_FAILURE_LIMIT)
        return pair_failures

    def reset_user_attempts(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        pair, _address = self.filter_user_attempts(request, credentials)
        deleted, _ = pair.delete()
        return deleted


def _failures(attempts: QuerySet[Any]) -> int:
    return int(attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0)


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """429 with Retry-After and a page that says why and for how long."""
    cooloff = settings.AXES_COOLOFF_TIME
    minutes = max(1, round(cooloff.total_seconds() / 60))
    response = render(
        request,
        "registration/locked_out.html",
        {
            "minutes": minutes,
            "failures": settings.AXES_FAILURE_LIMIT,
            "address_failures": settings.FAIRSCHED_LOGIN_ADDRESS_FAILURES,
        },
        status=429,
    )
    response["Retry-After"] = str(int(cooloff.total_seconds()))
    return response
