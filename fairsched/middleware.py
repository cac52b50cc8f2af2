"""Request guards that hold for every page, API call and lever, before any view sees the request."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults


def _refusal(field: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({field: [message]}, status=status)


class RequestGuardMiddleware:
    """1. Refuse a NUL character in the path or in any query parameter (400 naming the parameter):
       PostgreSQL refuses NUL in text, so it would otherwise surface as a database error in whichever
       filter, search box or lookup reads it (the API, the dashboard, the portal, the admin).
    2. Read a body sent with `Transfer-Encoding: chunked` (no Content-Length) within
       `FAIRSCHED_MAX_BODY_BYTES`, and answer 413 past it. Django and DRF read a body by its declared
       length, so without this a chunked body would be dropped silently; once read, the request
       carries the length it really had.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            return _refusal("detail", "the path must not contain NUL characters", 400)
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return _refusal(name.replace("\x00", "") or "detail", "must not contain NUL characters", 400)
        if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower() and not request.META.get(
            "CONTENT_LENGTH"
        ):
            refused = _read_chunked(request)
            if refused is not None:
                return refused
        return self.get_response(request)


def _read_chunked(request: HttpRequest) -> HttpResponse | None:
    """Read the whole chunked body, up to the limit, and give the request its real length."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = request.read(limit + 1) if limit is not None else request.read()
    if limit is not None and len(body) > limit:
        return _refusal("detail", f"the request body is larger than {limit} bytes", 413)
    # Django keeps a read body in `_body`; `request.body` and DRF's parsers read it from there.
    request._body = body
    request.META["CONTENT_LENGTH"] = str(len(body))
    return None


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def api_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: JSON under /api/ (as the schema documents), Django's page elsewhere."""
    if _is_api(request):
        return _refusal("detail", "Not found.", 404)
    return defaults.page_not_found(request, exception)


def api_bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: JSON under /api/, Django's page elsewhere."""
    if _is_api(request):
        return _refusal("detail", "Bad request.", 400)
    return defaults.bad_request(request, exception)
