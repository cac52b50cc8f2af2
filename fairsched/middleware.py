"""Request guards that hold for every page, API call and lever, before any view sees the request."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject, CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
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


class PolicyOnceCSPMiddleware(CSPMiddleware):
    """django-csp's middleware, with the settings' policies built once instead of for every response.

    The library builds each header anew per response (the directives merged with its defaults, copied
    and joined, for the policy and again for the report-only one), a visible share of a small API
    request's handler CPU (bench/bench_api.py). Without a nonce the result depends on the settings alone, so:

    1. A response of a view with a policy of its own (`csp.decorators` set `_csp_config`, `_csp_update`
       or `_csp_replace`, or their report-only twins), or a request whose page used its nonce
       (`request.csp_nonce`, a fresh value per request), goes the library's way.
    2. Any other response gets the headers built once from the settings (again after a settings change),
       with the library's rules: not on DEBUG's 404 and 500 pages, not over a header already set, not
       on an exempt response (`_csp_exempt`, `_csp_exempt_ro`) or an excluded path prefix.
    """

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if getattr(request, "_csp_nonce", None) is not None or any(
            getattr(response, name, None) is not None for name in _PER_RESPONSE_POLICY
        ):
            return super().process_response(request, response)
        if response.status_code in (500, 404) and settings.DEBUG:
            return response
        for header, policy, exempt, excluded in _settings_policies():
            exempted = getattr(response, exempt, False) is not False or request.path_info.startswith(excluded)
            if policy and header not in response and not exempted:
                response[header] = policy
        # As the library does: a nonce asked for after the header is written could not be in it.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)  # type: ignore[attr-defined]
        return response


# Set on a response by django-csp's decorators: a policy for that response only.
_PER_RESPONSE_POLICY = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)


class _SettingsPolicy(NamedTuple):
    header: str
    policy: str
    exempt: str  # the response attribute that exempts it
    excluded: tuple[str, ...]  # path prefixes without it


@functools.cache
def _settings_policies() -> tuple[_SettingsPolicy, ...]:
    """The policy and the report-only policy of the settings, as django-csp builds them without a nonce."""
    return tuple(
        _SettingsPolicy(
            header,
            build_policy(report_only=report_only),
            exempt,
            tuple((getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES", None) or ()),
        )
        for header, report_only, exempt, setting in (
            (HEADER, False, "_csp_exempt", "CONTENT_SECURITY_POLICY"),
            (HEADER_REPORT_ONLY, True, "_csp_exempt_ro", "CONTENT_SECURITY_POLICY_REPORT_ONLY"),
        )
    )


@receiver(setting_changed)
def _policy_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("CONTENT_SECURITY_POLICY", "CONTENT_SECURITY_POLICY_REPORT_ONLY"):
        _settings_policies.cache_clear()
