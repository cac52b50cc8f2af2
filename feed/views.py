"""The portal's webhook pages, for an org's admins: register an endpoint (its secret shown once), list
the org's endpoints (a disabled one says so, and why), an endpoint's delivery log, send again.

As everywhere in the portal, another org's slug or endpoint is a 404; a member who is not the org's
admin is refused (403) and sees no form.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from common.actors import Actor
from common.errors import NotFound, ServiceError
from feed import services
from feed.models import WebhookEndpoint
from feed.selectors import WEBHOOK_TYPES, deliveries_of, endpoint_get, endpoints_visible
from orgs.models import Membership, Org
from orgs.selectors import member_orgs, membership_get

LOG_SIZE = 50


def _admin_org(request: HttpRequest, slug: str) -> tuple[Org, HttpResponse | None]:
    """The org, if the user is its admin; 404 outside the user's orgs, 403 for another role."""
    try:
        membership = membership_get(user_id=int(request.user.pk or 0), slug=slug)
    except NotFound:
        raise Http404("No such org") from None
    if membership.role != Membership.Role.ADMIN:
        page = render(
            request,
            "portal/refused.html",
            {"org": membership.org, "problems": ["only the org's admins manage its webhooks"]},
            status=403,
        )
        return membership.org, page
    return membership.org, None


def _context(request: HttpRequest, org: Org, **extra: object) -> dict[str, object]:
    return {"org": org, "orgs": member_orgs(user_id=int(request.user.pk or 0)), **extra}


@login_required
def webhooks(request: HttpRequest, org_slug: str) -> HttpResponse:
    org, refusal = _admin_org(request, org_slug)
    if refusal is not None:
        return refusal
    endpoints = list(endpoints_visible(org_ids=[org.pk]))
    return render(
        request,
        "portal/webhooks/list.html",
        _context(
            request, org, endpoints=endpoints, types=WEBHOOK_TYPES, disabled=[e for e in endpoints if not e.active]
        ),
    )


@login_required
@require_POST
def register(request: HttpRequest, org_slug: str) -> HttpResponse:
    org, refusal = _admin_org(request, org_slug)
    if refusal is not None:
        return refusal
    try:
        endpoint, secret = services.webhook_endpoint_create(
            org=org,
            url=request.POST.get("url", "")[:2000],
            event_types=request.POST.getlist("event_types"),
            actor=Actor.tenant(request.user, [org.pk]),
        )
    except ServiceError as error:
        problem = f"{error.field}: {error.message}" if error.field else error.message
        return render(request, "portal/refused.html", {"org": org, "problems": [problem]}, status=error.status)
    return render(request, "portal/webhooks/created.html", _context(request, org, endpoint=endpoint, secret=secret))


@login_required
def endpoint_log(request: HttpRequest, org_slug: str, endpoint_id: int) -> HttpResponse:
    org, refusal = _admin_org(request, org_slug)
    if refusal is not None:
        return refusal
    endpoint = _endpoint(org, endpoint_id)
    deliveries = list(deliveries_of(endpoint=endpoint)[:LOG_SIZE])
    return render(request, "portal/webhooks/log.html", _context(request, org, endpoint=endpoint, deliveries=deliveries))


@login_required
@require_POST
def send_again(request: HttpRequest, org_slug: str, endpoint_id: int, delivery_id: int) -> HttpResponse:
    org, refusal = _admin_org(request, org_slug)
    if refusal is not None:
        return refusal
    endpoint = _endpoint(org, endpoint_id)
    try:
        services.webhook_delivery_send_again(
            endpoint=endpoint, delivery_id=delivery_id, actor=Actor.tenant(request.user, [org.pk])
        )
    except NotFound:
        raise Http404("No such delivery") from None
    messages.success(request, "Queued again, with the same idempotency key.")
    return redirect("portal-webhooks:log", org_slug=org.slug, endpoint_id=endpoint.pk)


@login_required
@require_POST
def enable(request: HttpRequest, org_slug: str, endpoint_id: int) -> HttpResponse:
    org, refusal = _admin_org(request, org_slug)
    if refusal is not None:
        return refusal
    endpoint = _endpoint(org, endpoint_id)
    active = request.POST.get("active") == "1"
    services.webhook_endpoint_update(endpoint=endpoint, active=active, actor=Actor.tenant(request.user, [org.pk]))
    messages.success(request, "Enabled: it resumes where it stopped." if active else "Disabled.")
    return redirect("portal-webhooks:list", org_slug=org.slug)


def _endpoint(org: Org, endpoint_id: int) -> WebhookEndpoint:
    try:
        return endpoint_get(org_ids=[org.pk], endpoint_id=endpoint_id)
    except NotFound:
        raise Http404("No such endpoint") from None
