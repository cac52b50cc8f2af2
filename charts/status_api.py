"""The chart status read (`GET /api/v1/charts/{id}/`) without DRF's generic machinery.

The status read is the API's most frequent call: pollers ask for their charts' places over and over.
Through DRF it cost a request wrapper, content negotiation, the authentication, permission and throttle
loops, the response's rendering through a template response, and two statements (the token, then the
chart): more than the read itself (bench/bench_api.py has the profile). Here the usual case is answered
directly, with the same checks in the same order, by the same functions, and the same bytes out:

1. Only a plain JSON read comes this way: GET, no query string, an Accept that DRF would answer with
   JSON (none, `*/*`, `application/json`) and a token in the Authorization header. Anything else (a
   browser session, the browsable API, `?format=`, HEAD, OPTIONS, a malformed header) goes to DRF.
2. One statement reads the token with its user and role (`orgs.access.TOKEN_FROM`) and the chart with
   its org, workflow and plan (`charts.selectors.CHART_FROM`), whatever the chart's org.
3. The token is judged as `ApiTokenAuthentication` judges it (`token_accepted`, `token_used`); the
   caller's rate as `CallerReadThrottle` counts it; the chart is shown only if the caller's scope
   (`scope_for`, `scope_of`'s rules) sees its org: any other chart is the same 404 as a missing one.
4. A refused token or a full rate goes to DRF, which refuses it again with its own answer (401, or 429
   with Retry-After; a refused request is not counted, so asking again counts nothing twice).
5. The chart is shaped by `ChartDetailSerializer` and rendered by DRF's `JSONRenderer`, with the
   headers DRF adds (`Vary: Accept`, `Allow`): the same response, byte for byte (tests/api).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header
from rest_framework.renderers import JSONRenderer

from charts.selectors import BIGINT_MAX, CHART_FROM, CHART_ROW, chart_from_row, chart_not_found
from charts.serializers import ChartDetailSerializer
from common import rows
from orgs.access import (
    TOKEN_FROM,
    TOKEN_ROW,
    TOKEN_WHERE,
    CallerReadThrottle,
    scope_for,
    token_accepted,
    token_digest,
    token_from_row,
    token_used,
)

View = Callable[..., HttpResponse]

# Accept headers that DRF's negotiation answers with JSON, its first renderer, and no media type
# parameter (`indent`) to honour: anything else is DRF's to negotiate.
JSON_ACCEPTS = frozenset({"", "*/*", "application/json"})
# The token and the chart in one statement; the chart's columns are NULL when it does not exist.
STATUS_ROW = TOKEN_ROW + CHART_ROW
STATUS_SQL = (
    f"SELECT {STATUS_ROW.sql} FROM {TOKEN_FROM}"  # noqa: S608 (names from the models; values are parameters)
    f' LEFT JOIN ({CHART_FROM}) ON c."id" = %s WHERE {TOKEN_WHERE}'
)
# What DRF answers a detail route of the chart viewset with, beside the body (`finalize_response`).
ALLOW = "GET, HEAD, OPTIONS"
_renderer = JSONRenderer()


def chart_status_view(fallback: View) -> View:
    """The status read, falling back to `fallback` (the viewset's own retrieve) for what it leaves to DRF."""

    @csrf_exempt  # as DRF's views are: a session's unsafe method is DRF's to check
    def chart_status(request: HttpRequest, pk: str) -> HttpResponse:
        answer = _answer(request, pk)
        return fallback(request, pk=pk) if answer is None else answer

    return chart_status


def _answer(request: HttpRequest, pk: str) -> HttpResponse | None:
    """The response to a plain token read of chart `pk`, or None to leave the request to DRF."""
    if request.method != "GET" or request.META.get("QUERY_STRING"):
        return None
    if request.META.get("HTTP_ACCEPT", "").strip() not in JSON_ACCEPTS:
        return None
    chart_id = int(pk)
    if chart_id > BIGINT_MAX:
        return None
    try:
        digest = token_digest(get_authorization_header(request))  # type: ignore[arg-type]  # (it reads META only)
    except exceptions.AuthenticationFailed:
        return None
    if digest is None:
        return None
    row = rows.fetch_one(STATUS_SQL, [chart_id, digest])
    if row is None:
        return None
    token = token_from_row(row, STATUS_ROW)
    if not token_accepted(token):
        return None
    token_used(token)
    if not CallerReadThrottle().allow("GET", token=token, user=token.user):
        return None
    request.user = token.user  # as DRF sets it for what runs after the view
    chart_id_read = STATUS_ROW.part(row, "chart")[0]
    chart = None if chart_id_read is None else chart_from_row(row, STATUS_ROW)
    if chart is None or not scope_for(token=token, user=token.user).sees(chart.org_id):
        error = chart_not_found()
        return _json(error.as_dict(), error.status)
    return _json(ChartDetailSerializer(chart).data, 200)


def _json(data: Any, status: int) -> HttpResponse:
    response = HttpResponse(_renderer.render(data), status=status, content_type=_renderer.media_type)
    patch_vary_headers(response, ("Accept",))
    response["Allow"] = ALLOW
    return response
