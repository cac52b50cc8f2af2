"""The CSP header built once (`fairsched.middleware.PolicyOnceCSPMiddleware`) is django-csp's, case by case."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from csp.constants import HEADER, HEADER_REPORT_ONLY, NONCE, SELF
from csp.middleware import CSPMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from fairsched.middleware import PolicyOnceCSPMiddleware

WITH_NONCE = {"DIRECTIVES": {"default-src": [SELF], "script-src": [SELF, NONCE]}}
REPORT_ONLY = {"DIRECTIVES": {"default-src": [SELF], "report-uri": "/csp-report/"}}


def _headers(
    middleware_class: type[CSPMiddleware], path: str, prepare: Callable[[HttpRequest, HttpResponse], Any]
) -> tuple[dict[str, str | None], HttpRequest]:
    """The CSP headers the middleware gives a response (the request's nonce shown as NONCE), and the request."""
    request = RequestFactory().get(path)
    middleware = middleware_class(lambda request: HttpResponse())
    middleware.process_request(request)
    response = HttpResponse(status=200)
    prepare(request, response)
    middleware.process_response(request, response)
    nonce = getattr(request, "_csp_nonce", None)
    headers = {name: response.get(name) for name in (HEADER, HEADER_REPORT_ONLY)}
    if nonce is not None:  # a fresh value per request: compared as a placeholder
        headers = {name: value and value.replace(nonce, "NONCE") for name, value in headers.items()}
    return headers, request


def _nothing(request: HttpRequest, response: HttpResponse) -> None:
    pass


def _use_nonce(request: HttpRequest, response: HttpResponse) -> None:
    str(request.csp_nonce)  # type: ignore[attr-defined]


CASES: dict[str, tuple[dict[str, Any], str, Callable[[HttpRequest, HttpResponse], Any]]] = {
    "the project's policy": ({}, "/portal/", _nothing),
    "exempt": ({}, "/portal/", lambda request, response: setattr(response, "_csp_exempt", True)),
    "a view's update": (
        {},
        "/portal/",
        lambda request, response: setattr(response, "_csp_update", {"img-src": ["https://example.com"]}),
    ),
    "a view's replacement": (
        {},
        "/portal/",
        lambda request, response: setattr(response, "_csp_replace", {"script-src": ["https://example.com"]}),
    ),
    "a header set already": ({}, "/portal/", lambda request, response: response.__setitem__(HEADER, "default-src *")),
    "a nonce in the policy, unused": ({"CONTENT_SECURITY_POLICY": WITH_NONCE}, "/portal/", _nothing),
    "a nonce in the policy, used": ({"CONTENT_SECURITY_POLICY": WITH_NONCE}, "/portal/", _use_nonce),
    "an excluded prefix": (
        {"CONTENT_SECURITY_POLICY": {**WITH_NONCE, "EXCLUDE_URL_PREFIXES": ["/api/"]}},
        "/api/v1/charts/",
        _nothing,
    ),
    "a report-only policy": ({"CONTENT_SECURITY_POLICY_REPORT_ONLY": REPORT_ONLY}, "/portal/", _nothing),
    "report-only exempt": (
        {"CONTENT_SECURITY_POLICY_REPORT_ONLY": REPORT_ONLY},
        "/portal/",
        lambda request, response: setattr(response, "_csp_exempt_ro", True),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_headers_are_the_librarys(case: str, settings: Any) -> None:
    changes, path, prepare = CASES[case]
    for name, value in changes.items():
        setattr(settings, name, value)
    ours, _ = _headers(PolicyOnceCSPMiddleware, path, prepare)
    theirs, _ = _headers(CSPMiddleware, path, prepare)
    assert ours == theirs
    with pytest.raises(Exception, match="not available after the CSP header"):
        str(_headers(PolicyOnceCSPMiddleware, path, _nothing)[1].csp_nonce)  # type: ignore[attr-defined]


def test_a_used_nonce_is_in_the_header_each_time(settings: Any) -> None:
    settings.CONTENT_SECURITY_POLICY = WITH_NONCE
    first, first_request = _headers(PolicyOnceCSPMiddleware, "/portal/", _use_nonce)
    second, second_request = _headers(PolicyOnceCSPMiddleware, "/portal/", _use_nonce)
    assert first[HEADER] == second[HEADER]
    assert set((first[HEADER] or "").split("; ")) == {"default-src 'self'", "script-src 'self' 'nonce-NONCE'"}
    assert first_request._csp_nonce != second_request._csp_nonce  # type: ignore[attr-defined]


def test_a_changed_setting_is_followed(settings: Any) -> None:
    before, _ = _headers(PolicyOnceCSPMiddleware, "/portal/", _nothing)
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    after, _ = _headers(PolicyOnceCSPMiddleware, "/portal/", _nothing)
    assert "frame-ancestors 'none'" in (before[HEADER] or "")
    assert after[HEADER] == "default-src 'none'"
