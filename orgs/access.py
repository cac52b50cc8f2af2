"""Who may call the API and how often: API tokens, their authentication, the caller's scope, throttles.

Every API view asks `scope_of(request)` which orgs the caller may see and write; selectors filter by it,
so another org's rows are simply not there (404, never 403). Tokens and memberships are the orgs app's
rows, so this lives here; the API's generic shell (parsing, pagination, error mapping) is `common.api`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import redis
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, permissions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from common import rows
from common.actors import Actor
from common.errors import InvalidInput, NotFound
from orgs.models import ApiToken, Membership, Org

if TYPE_CHECKING:
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)
TOKEN_KEYWORDS = (b"token", b"bearer")
# last_used_at is refreshed at most this often, so that reads stay free of writes.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_token_issue(*, user: User, org: Org | None = None, staff: bool = False, name: str = "") -> str:
    """Create a token scoped to `org` or to staff and return its secret (shown once, stored as a digest)."""
    if (org is None) == (not staff):
        raise ValueError("a token is scoped to an org or to staff, not both and not neither")
    secret = secrets.token_hex(20)
    with transaction.atomic():
        ApiToken.objects.create(
            user=user, org=org, is_staff=staff, name=name[:200], key_hash=_digest(secret), prefix=secret[:8]
        )
    return secret


def api_token_grant(*, user: User, org: Org | None, staff: bool, name: str, actor: Actor) -> tuple[ApiToken, str]:
    """Issue a token through the API: the row and its secret (shown once). An org token needs a user
    who is a member of the org, a staff token a staff user (the authentication refuses any other).
    Staff only."""
    actor.staff_required(field="token")
    if (org is None) == (not staff):
        raise InvalidInput("give org or staff, not both and not neither", field="org")
    if staff and not user.is_staff:
        raise InvalidInput(f"{user.username} is not staff", field="user")
    if org is not None and not Membership.objects.filter(user=user, org=org).exists():
        raise InvalidInput(f"{user.username} is not a member of {org.slug}; add the membership first", field="user")
    if not user.is_active:
        raise InvalidInput(f"{user.username} is deactivated", field="user")
    with transaction.atomic():
        secret = api_token_issue(user=user, org=org, staff=staff, name=name)
        token = ApiToken.objects.select_related("user", "org").get(key_hash=_digest(secret))
    logger.info("api token %s… issued to %s (%s) by %s", token.prefix, user.username, org or "staff", actor)
    return token, secret


def api_token_revoke(*, token_id: int, actor: Actor) -> None:
    """Revoke (delete) a token: it stops working at once. Staff only."""
    actor.staff_required(field="token")
    deleted, _ = ApiToken.objects.filter(pk=token_id).delete()
    if not deleted:
        raise NotFound("token not found", field="token")
    logger.info("api token %s revoked by %s", token_id, actor)


# A token, its user and the user's role in the token's org, as one statement (`common/rows.py`). The
# parts are exposed so that a hot read can fetch its own row in the same statement (charts' status read).
TOKEN_ROW = rows.Layout(
    [("token", rows.model_columns(ApiToken, "t")), ("user", rows.model_columns(User, "u")), ("role", ['m."role"'])]
)
TOKEN_FROM = (
    f'"{ApiToken._meta.db_table}" t'
    f' JOIN "{User._meta.db_table}" u ON u."id" = t."user_id"'
    f' LEFT JOIN "{Membership._meta.db_table}" m ON m."user_id" = t."user_id" AND m."org_id" = t."org_id"'
)
TOKEN_WHERE = 't."key_hash" = %s'  # noqa: S105 (a condition on the digest, not a secret)
TOKEN_LOOKUP_SQL = f"SELECT {TOKEN_ROW.sql} FROM {TOKEN_FROM} WHERE {TOKEN_WHERE}"  # noqa: S608 (names from the models; values are parameters)


def token_digest(header: bytes) -> str | None:
    """The digest of the secret in an `Authorization: Token <secret>` (or `Bearer`) header; None when
    the header names no token. A malformed token header is AuthenticationFailed."""
    words = header.split()
    if not words or words[0].lower() not in TOKEN_KEYWORDS:
        return None
    if len(words) != 2:
        raise exceptions.AuthenticationFailed("Authorization header must be 'Token <secret>'.")
    try:
        secret = words[1].decode()
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("Invalid token.") from None
    return _digest(secret)


def token_from_row(values: Sequence[Any], layout: rows.Layout = TOKEN_ROW) -> ApiToken:
    """The token of a row laid out by `layout` (`TOKEN_ROW`, or a layout that adds it to others),
    with its user (`token.user`) and the user's role in the token's org (`token.member_role`, None
    when not a member)."""
    token = rows.from_row(ApiToken, layout.part(values, "token"))
    token.user = rows.from_row(User, layout.part(values, "user"))
    (token.member_role,) = layout.part(values, "role")  # type: ignore[attr-defined]
    return token


def _token_with_user(key_hash: str) -> ApiToken | None:
    """The token of this digest with its user and role (`token_from_row`), or None: one query."""
    row = rows.fetch_one(TOKEN_LOOKUP_SQL, [key_hash])
    return None if row is None else token_from_row(row)


def token_accepted(token: ApiToken) -> bool:
    """Whether a token (with its user and role, `token_from_row`) may act: its user is active; a staff
    token's user is still staff; an org token's user is still a member of the org."""
    if not token.user.is_active:
        return False
    if token.is_staff and not token.user.is_staff:
        return False
    return token.org_id is None or getattr(token, "member_role", None) is not None


def token_used(token: ApiToken) -> None:
    """Record that the token was used, at most once per LAST_USED_RESOLUTION (reads stay free of writes)."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


class ApiTokenAuthentication(BaseAuthentication):
    """`Authorization: Token <secret>` (or `Bearer`). Sets `request.auth` to the `ApiToken`.

    An org token stops working when its user leaves the org; a staff token when its user stops being
    staff. Either stops when the user is deactivated.
    """

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        digest = token_digest(get_authorization_header(request))
        if digest is None:
            return None
        token = _token_with_user(digest)
        if token is None or not token_accepted(token):
            raise exceptions.AuthenticationFailed("Invalid token.")
        token_used(token)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = ApiTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <secret>`; issue one with `manage.py issue_token`.",
        }


# The sliding log of one caller's requests, kept in a Redis sorted set and checked and updated in one
# round trip: drop the times older than the window, refuse if the window is full (answering the oldest
# time, from which Retry-After follows), else add this request's time and renew the key's expiry.
SLIDING_LOG_SCRIPT = """
local key, now, window, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
if redis.call('ZCARD', key) >= limit then
    return redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
end
redis.call('ZADD', key, now, ARGV[4])
redis.call('PEXPIRE', key, math.ceil(window * 1000))
return false
"""


class _ThrottleStore:
    """This process's Redis client for the throttle and its registered script, made on first use.
    redis-py's connection pool notices a fork and reconnects in the child."""

    _client: redis.Redis | None = None
    _script: Any = None

    @classmethod
    def script(cls) -> Any:
        if cls._client is None:
            cls._client = redis.Redis.from_url(settings.REDIS_URL)
            cls._script = cls._client.register_script(SLIDING_LOG_SCRIPT)
        return cls._script


class CallerThrottle(SimpleRateThrottle):
    """A rate per caller: per API token (each token its own bucket), or per user for a browser
    session. A caller over its rate gets 429 with Retry-After. Reads and writes have rates of their own
    (`FAIRSCHED_API_READ_RATE`, `FAIRSCHED_API_WRITE_RATE`): a client polling its charts cannot use up
    the budget of its submissions, nor the other way round. A rate of "off" turns a limit off.

    The rule is DRF's (at most N requests in any window of the rate's period), but the log lives in
    Redis as a sorted set updated by one script (`SLIDING_LOG_SCRIPT`): one round trip a request
    instead of DRF's cache read and write of the whole pickled list, and no lost update when two web
    processes count one caller at once.
    """

    methods: frozenset[str] = frozenset()
    # Set by SimpleRateThrottle.__init__ from the rate ("100/s": 100 requests, 1 second).
    num_requests: int | None
    duration: int | None

    def allow_request(self, request: Request, view: APIView) -> bool:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return self.allow(request.method or "", token=token, user=request.user)

    def allow(self, method: str, *, token: ApiToken | None, user: Any) -> bool:
        """Whether the caller (a token, else a session's user) may make this request now; if so it is
        counted. A refusal is not counted: asking again gives the same answer until the window moves."""
        if method not in self.methods or self.rate is None:
            return True
        self.key = self.caller_key(token=token, user=user)
        if self.key is None or self.num_requests is None or self.duration is None:
            return True
        self.now = self.timer()
        oldest = _ThrottleStore.script()(
            keys=[self.key], args=[self.now, self.duration, self.num_requests, f"{self.now}:{secrets.token_hex(4)}"]
        )
        if oldest is None:
            return True
        self.history = [float(oldest)]
        return False

    def wait(self) -> float | None:
        """Seconds until the oldest request of the full window leaves it."""
        if not self.history or self.duration is None:
            return None
        return max(0.0, self.history[0] + self.duration - self.now)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return self.caller_key(token=token, user=request.user)

    def caller_key(self, *, token: ApiToken | None, user: Any) -> str | None:
        """The Redis key of the caller's log: per token, or per user for a browser session."""
        if token is not None:
            ident = f"token:{token.pk}"
        elif user and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            return None  # refused by authentication anyway
        prefix = settings.CACHES["default"].get("KEY_PREFIX", "")
        return f"{prefix}:{self.cache_format % {'scope': self.scope, 'ident': ident}}"


class CallerReadThrottle(CallerThrottle):
    scope = "read"
    methods = frozenset({"GET", "HEAD", "OPTIONS"})


class CallerWriteThrottle(CallerThrottle):
    scope = "write"
    methods = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Scope:
    """What a caller may reach: every org (staff) or the listed orgs, and which of those it may write."""

    staff: bool
    org_ids: frozenset[int]
    writable_org_ids: frozenset[int]

    def sees(self, org_id: int) -> bool:
        return self.staff or org_id in self.org_ids

    def writes(self, org_id: int) -> bool:
        return self.staff or org_id in self.writable_org_ids


def scope_of(request: Request) -> Scope:
    """The caller's scope, computed once per request.

    1. An org token acts only within its org, even for a staff user or a member of several orgs.
    2. A staff token, or a staff user's browser session, acts as staff: every org.
    3. Anyone else acts within their memberships; viewers read but do not write.
    """
    cached = getattr(request, "_fairsched_scope", None)
    if cached is not None:
        return cached
    token = request.auth if isinstance(request.auth, ApiToken) else None
    scope = scope_for(token=token, user=request.user)
    request._fairsched_scope = scope  # type: ignore[attr-defined]
    return scope


def scope_for(*, token: ApiToken | None, user: Any) -> Scope:
    """The scope of a caller: its token if it came with one (else a session's user); `scope_of`'s rules."""
    if (token is not None and token.is_staff) or (token is None and user.is_staff):
        return Scope(staff=True, org_ids=frozenset(), writable_org_ids=frozenset())
    # The authentication brought an org token's role along (`member_role`); look it up only if it did
    # not. The queryset is built only when it runs: building one is a visible share of a status read.
    org_id: int | None = token.org_id if token is not None else None
    role = getattr(token, "member_role", None) if org_id is not None else None
    pairs: list[tuple[int, str]]
    if org_id is not None and role:
        pairs = [(org_id, role)]
    else:
        memberships = Membership.objects.filter(user_id=user.pk or 0)
        if org_id is not None:
            memberships = memberships.filter(org_id=org_id)
        pairs = list(memberships.values_list("org_id", "role"))
    return Scope(
        staff=False,
        org_ids=frozenset(org_id for org_id, _ in pairs),
        writable_org_ids=frozenset(org_id for org_id, role in pairs if role != Membership.Role.VIEWER),
    )


def actor_of(request: Request) -> Actor:
    """Who acts in this API request, for the services: an operator (staff scope), else a tenant who
    writes in the orgs of its scope where it is not a viewer (`scope_of`'s rules)."""
    scope = scope_of(request)
    if scope.staff:
        return Actor.operator(request.user)
    return Actor.tenant(request.user, scope.writable_org_ids)


def visible_org_ids(request: Request) -> frozenset[int] | None:
    """The orgs the caller may see, as selectors take them: None for staff (every org)."""
    scope = scope_of(request)
    return None if scope.staff else scope.org_ids


class IsStaffScope(permissions.BasePermission):
    """Staff-only operations. Refused with 403 whatever the object, so a refusal confirms nothing."""

    message = "Only staff may do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated) and scope_of(request).staff


def require_write(request: Request, org_id: int) -> None:
    """Refuse a write in an org the caller can see but not change (a viewer membership)."""
    if not scope_of(request).writes(org_id):
        raise exceptions.PermissionDenied("Your membership in this org is read-only.")


class AccountBackend(ModelBackend):
    """Django's sign-in by username and password; a signed-in user is loaded with the zone they read
    times in (`ViewerZone`), in the one query that loads the user for each request."""

    def get_user(self, user_id: int) -> Any:
        user = User.objects.select_related("viewer_zone").filter(pk=user_id).first()
        return user if user is not None and self.user_can_authenticate(user) else None
