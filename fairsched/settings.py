"""Settings for fairsched, all read from the environment in this one module.

Every value a deployment changes comes from a variable; the defaults suit a developer's machine and the
test suite. PostgreSQL is the only database (the dispatcher relies on its advisory locks).
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from fairsched.logs import logging_config

# Lets admin and form classes be subscripted for the type checker (ModelAdmin[Org]).
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_rate(name: str, default: str) -> str | None:
    """A request rate like "600/min" (per s, min, hour or day); "off" for none."""
    value = os.environ.get(name, default).strip().lower()
    if value in {"off", "none", ""}:
        return None
    count, _, period = value.partition("/")
    # DRF reads only the period's first letter, so "10/month" would mean per minute: name them whole.
    if not count.isdigit() or int(count) < 1 or period not in {"s", "sec", "m", "min", "h", "hour", "d", "day"}:
        raise ImproperlyConfigured(f"{name} must be like 600/min (per s, min, hour or day) or off, got {value!r}")
    return value


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, str(default))
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from None


def env_positive(name: str, default: float, *, whole: bool = False) -> float:
    """A number > 0 (a whole one with `whole`): seconds or a count."""
    raw = os.environ.get(name)
    try:
        value = float(default if raw is None else raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if not 0 < value < math.inf or (whole and not value.is_integer()):
        kind = "a whole number" if whole else "a number"
        raise ImproperlyConfigured(f"{name} must be {kind} greater than 0, got {raw!r}")
    return value


def env_whole(name: str, default: int) -> int:
    """A whole number >= 0: a count of days or of things, where 0 means none (or: no limit)."""
    raw = os.environ.get(name)
    value = str(default) if raw is None else raw.strip()
    if not (value.isascii() and value.isdigit()):
        raise ImproperlyConfigured(f"{name} must be a whole number of 0 or more, got {raw!r}")
    return int(value)


DEBUG = env_bool("DEBUG", False)
# The fallback key is for development only; `manage.py check --deploy` flags it.
SECRET_KEY = os.environ.get("SECRET_KEY") or "django-insecure-fairsched-development-key"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "csp",
    "django_htmx",
    "orgs",
    "knobs",
    "charts",
    "scheduling",
    "feed",
    # The project itself, for its management commands (`readyz`); it has no models.
    "fairsched",
]

MIDDLEWARE = [
    # /healthz and /readyz, answered before the host check and the HTTPS redirect (fairsched/health.py).
    "fairsched.health.HealthMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "fairsched.middleware.RequestGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The admin's forms in the signed-in account's zone (after the user is known).
    "orgs.middleware.AdminZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "fairsched.middleware.PolicyOnceCSPMiddleware",
    # Last, as axes asks: it answers a locked-out login after the view has run.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes; see fairsched/logins.py): failures are counted per (username, address)
# and per address, each against its own limit (the address's higher: one address may serve many users);
# past it, that pair or that address is locked out for the cool-off, with 429 and Retry-After.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's, loading the user's zone with the user (`orgs.access.AccountBackend`); Django's own stays
    # listed for the sessions signed in through it before.
    "orgs.access.AccountBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("FAIRSCHED_LOGIN_FAILURES", 5))
FAIRSCHED_LOGIN_ADDRESS_FAILURES = int(os.environ.get("FAIRSCHED_LOGIN_ADDRESS_FAILURES", 20))
AXES_COOLOFF_TIME = timedelta(minutes=env_float("FAIRSCHED_LOGIN_COOLOFF_MINUTES", 15))
# The order matters: fairsched.logins.PairAndAddressHandler reads the pair first, the address second.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_HANDLER = "fairsched.logins.PairAndAddressHandler"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "fairsched.logins.locked_out"
# Behind a proxy, the address is the left-most of X-Forwarded-For only when the proxy is trusted to set it.
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR") if env_bool("FAIRSCHED_BEHIND_PROXY", False) else ("REMOTE_ADDR",)
)

# Content-Security-Policy on every page: scripts and styles come from our own static files only (no
# inline script or style runs), the live pages connect back to this host only, nothing frames us. It has
# no nonce: its header is built once (fairsched.middleware.PolicyOnceCSPMiddleware), not per response.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

ROOT_URLCONF = "fairsched.urls"
WSGI_APPLICATION = "fairsched.wsgi.application"
ASGI_APPLICATION = "fairsched.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "scheduling.context_processors.freshness",
                "orgs.context_processors.viewer_zone",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fairsched")
# Under ASGI each request runs in a thread of its own, so persistent connections would pile up until
# PostgreSQL refuses clients: connections close after each request, or come from a pool (psycopg-pool)
# when FAIRSCHED_DB_POOL is on. The pool is for the web server; forked Celery children must not share one.
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL")
# libpq waits for ever on a server that takes the connection and never answers; ?connect_timeout= in
# DATABASE_URL changes this.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 10)
if env_bool("FAIRSCHED_DB_POOL", False):
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 2,
        "max_size": int(os.environ.get("FAIRSCHED_DB_POOL_SIZE", 16)),
    }
# Threads of a web worker that run requests (fairsched/wsgi_bridge.py): each holds at most one database
# connection while it serves one, so keep it at most FAIRSCHED_DB_POOL_SIZE.
WEB_THREADS = int(os.environ.get("FAIRSCHED_WEB_THREADS", 8))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": os.environ.get("CHANNELS_PREFIX", "fairsched")},
    }
}
# A live socket's frame over this many bytes closes it (code 1009); its session is re-checked (expired or
# flushed: closed with 4401, as at logout) when a frame or an event arrives, at most once per interval.
WEBSOCKET_MAX_FRAME_BYTES = int(env_positive("WEBSOCKET_MAX_FRAME_BYTES", 64 * 1024, whole=True))
WEBSOCKET_SESSION_CHECK_SECONDS = env_positive("WEBSOCKET_SESSION_CHECK_SECONDS", 15)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("CACHE_PREFIX", "fairsched"),
    }
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Pool processes of a Celery worker (default: one per core).
CELERY_WORKER_CONCURRENCY = int(os.environ.get("CELERY_WORKER_CONCURRENCY") or 0) or None
# Beat keeps its one-entry schedule in memory: no file, so any number of beats can run on one host.
CELERY_BEAT_SCHEDULER = "celery.beat:Scheduler"
# Celery logs through Django's LOGGING (plain or JSON lines) instead of replacing the root's handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

TEMPORAL_ADDRESS = os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233")
TEMPORAL_NAMESPACE = os.environ.get("TEMPORAL_NAMESPACE", "default")
TEMPORAL_TASK_QUEUE = os.environ.get("TEMPORAL_TASK_QUEUE", "fairsched-demo")
# A real cluster (scheduling/temporal/connection.py): mutual TLS with a client certificate and key (PEM
# files), the server's CA and name, or an API key (Temporal Cloud); TLS is on when either is given.
TEMPORAL_TLS_CERT = os.environ.get("TEMPORAL_TLS_CERT", "")
TEMPORAL_TLS_KEY = os.environ.get("TEMPORAL_TLS_KEY", "")
TEMPORAL_TLS_CA = os.environ.get("TEMPORAL_TLS_CA", "")
TEMPORAL_TLS_SERVER_NAME = os.environ.get("TEMPORAL_TLS_SERVER_NAME", "")
TEMPORAL_API_KEY = os.environ.get("TEMPORAL_API_KEY", "")
TEMPORAL_TLS = env_bool("TEMPORAL_TLS", bool(TEMPORAL_TLS_CERT or TEMPORAL_API_KEY))
if bool(TEMPORAL_TLS_CERT) != bool(TEMPORAL_TLS_KEY):
    raise ImproperlyConfigured("TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY go together: set both or neither")
if (TEMPORAL_TLS_CERT or TEMPORAL_TLS_CA or TEMPORAL_TLS_SERVER_NAME) and not TEMPORAL_TLS:
    raise ImproperlyConfigured("TEMPORAL_TLS_CERT, TEMPORAL_TLS_CA and TEMPORAL_TLS_SERVER_NAME need TEMPORAL_TLS on")
# Seconds a process keeps retrying (with backoff) to reach Temporal at start-up before it fails.
TEMPORAL_CONNECT_TIMEOUT = env_float("TEMPORAL_CONNECT_TIMEOUT", 60.0)
# Seconds the Temporal worker lets running activities finish after SIGTERM before cancelling them.
TEMPORAL_WORKER_SHUTDOWN_SECONDS = env_float("TEMPORAL_WORKER_SHUTDOWN_SECONDS", 5.0)

# Fallback expected duration of a chart (seconds) when no run of its org or workflow has finished yet.
FAIRSCHED_DEFAULT_DURATION = env_float("FAIRSCHED_DEFAULT_DURATION", 60.0)
# Spread (log-sigma) of that fallback duration while no pair has two finished runs; once some have,
# the spread pooled over every pair's runs is used instead. The ETA band widens by it.
FAIRSCHED_DEFAULT_DURATION_SPREAD = env_positive("FAIRSCHED_DEFAULT_DURATION_SPREAD", 0.5)
# Seconds a workflow run may take when its workflow sets no run timeout: Temporal's execution timeout.
FAIRSCHED_RUN_TIMEOUT = int(env_positive("FAIRSCHED_RUN_TIMEOUT", 86400, whole=True))
# Seconds a cancelled chart's workflow has to close after its cancel request before it is terminated.
FAIRSCHED_CANCEL_GRACE = env_positive("FAIRSCHED_CANCEL_GRACE", 30.0)
# A provider throttle without Retry-After pauses the provider for the org this many seconds.
FAIRSCHED_THROTTLE_PAUSE = env_positive("FAIRSCHED_THROTTLE_PAUSE", 60.0)
# When one provider throttles this many distinct orgs within the window (seconds), it is paused for everyone.
FAIRSCHED_THROTTLE_SPREAD_ORGS = int(env_positive("FAIRSCHED_THROTTLE_SPREAD_ORGS", 2, whole=True))
FAIRSCHED_THROTTLE_SPREAD_WINDOW = env_positive("FAIRSCHED_THROTTLE_SPREAD_WINDOW", 60.0)
# The change feed (GET /api/v1/events/) and webhooks (the feed app). An org's clear-time "slips" (an
# org.clear_time_slipped event) when a replan moves it later by more than this share of the wait it
# had predicted, and by at least the minimum (seconds).
FAIRSCHED_FEED_SLIP_SHARE = env_positive("FAIRSCHED_FEED_SLIP_SHARE", 0.25)
FAIRSCHED_FEED_SLIP_MIN_SECONDS = env_positive("FAIRSCHED_FEED_SLIP_MIN_SECONDS", 60.0)
# Long-polls of the feed one web process holds at once (each holds a request thread, not a connection).
FAIRSCHED_FEED_MAX_WAITERS = int(env_positive("FAIRSCHED_FEED_MAX_WAITERS", 4, whole=True))
# The what-if's base (scheduling/what_if.py): a replan hands its snapshot and plan over to the web
# processes through the cache (the last version only), for at most this many seconds, when
# at most this many charts wait (0: never). The payload is ~165 bytes a waiting chart, and handing it
# over adds to the replan (bench/bench_what_if.py).
FAIRSCHED_WHAT_IF_HANDOVER_SECONDS = int(env_positive("FAIRSCHED_WHAT_IF_HANDOVER_SECONDS", 600, whole=True))
FAIRSCHED_WHAT_IF_HANDOVER_MAX_CHARTS = env_whole("FAIRSCHED_WHAT_IF_HANDOVER_MAX_CHARTS", 300_000)
# Webhook destinations: https only, and only public addresses, unless these allow more.
FAIRSCHED_WEBHOOK_ALLOW_HTTP = env_bool("FAIRSCHED_WEBHOOK_ALLOW_HTTP", False)
FAIRSCHED_WEBHOOK_ALLOW_PRIVATE = env_bool("FAIRSCHED_WEBHOOK_ALLOW_PRIVATE", False)
# Seconds to connect and to read a delivery's answer; bytes of the answer kept.
FAIRSCHED_WEBHOOK_TIMEOUT = env_positive("FAIRSCHED_WEBHOOK_TIMEOUT", 5.0)
FAIRSCHED_WEBHOOK_RESPONSE_CAP = int(env_positive("FAIRSCHED_WEBHOOK_RESPONSE_CAP", 4096, whole=True))
# Retries wait FIRST_RETRY seconds, doubling up to an hour; an endpoint failing for GIVE_UP seconds is disabled.
FAIRSCHED_WEBHOOK_FIRST_RETRY = env_positive("FAIRSCHED_WEBHOOK_FIRST_RETRY", 5.0)
FAIRSCHED_WEBHOOK_GIVE_UP = env_positive("FAIRSCHED_WEBHOOK_GIVE_UP", 86400.0)
# Seconds between beat's webhook ticks (collect the feed's new events, send what is due): half of it is
# the mean wait a delivery adds to its event's commit.
FAIRSCHED_WEBHOOK_TICK = env_positive("FAIRSCHED_WEBHOOK_TICK", 0.5)
# Retention (scheduling/retention.py): finished charts (succeeded, failed, cancelled) that finished more
# than this many days ago are deleted with their events by a beat task, in short batches; 0 keeps
# everything. With an export directory, each batch is first written there as gzip JSON lines, and fsynced.
FAIRSCHED_RETENTION_DAYS = env_whole("FAIRSCHED_RETENTION_DAYS", 90)
FAIRSCHED_RETENTION_EXPORT_DIR = os.environ.get("FAIRSCHED_RETENTION_EXPORT_DIR", "").strip()
# Bearer token a Prometheus scraper presents to /metrics (staff sessions need none).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
# Largest request body the API accepts (bytes); Django refuses larger bodies with 400.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("FAIRSCHED_MAX_BODY_BYTES", 5 * 1024 * 1024))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/portal/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "orgs.access.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "common.api.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["orgs.access.CallerReadThrottle", "orgs.access.CallerWriteThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "read": env_rate("FAIRSCHED_API_READ_RATE", "100/s"),
        "write": env_rate("FAIRSCHED_API_WRITE_RATE", "20/s"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "fairsched API",
    "DESCRIPTION": "Submit and follow charts; steer the fair scheduler.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Every operation documents its error answers (fairsched/schema.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "fairsched.schema.document_errors"],
    # A webhook delivery's state is not a chart's: each its own name in the schema (a chart's as before).
    "ENUM_NAME_OVERRIDES": {
        "StateEnum": "charts.models.ChartState",
        "WebhookDeliveryStateEnum": "feed.models.DeliveryState",
    },
}

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG and env_bool("FAIRSCHED_HTTPS", False))
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", SECURE_SSL_REDIRECT)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31536000 if SECURE_SSL_REDIRECT else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# Plain lines, or JSON lines (FAIRSCHED_LOG_JSON) for a log pipeline; the same for every process type.
LOGGING = logging_config(
    json_lines=env_bool("FAIRSCHED_LOG_JSON", False),
    level=os.environ.get("LOG_LEVEL", "INFO"),
    access_log=env_bool("FAIRSCHED_ACCESS_LOG", False),
)
