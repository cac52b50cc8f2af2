"""The REST API's generic shell: strict JSON bodies with a size limit, cursor pagination, error mapping.

Services raise `ServiceError`s; the exception handler turns them into `{"field": ["message"]}` bodies
with their HTTP status. Who the caller is and what it may reach is `orgs.access`. A PATCH of one row
may name the version it edits (`If-Match`, from the `ETag` its GET answered): `if_match_check`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db.models import Field, IntegerField, Model
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, pagination, status
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from common import strict
from common.errors import PreconditionFailed, QueueFull, ServiceError

if TYPE_CHECKING:
    from rest_framework.views import APIView

# The largest value of PostgreSQL's bigint (the ids).
BIGINT_MAX = 2**63 - 1


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


class LimitedJSONParser(JSONParser):
    """JSON bodies up to DATA_UPLOAD_MAX_MEMORY_SIZE, read strictly (`common.strict.loads`: no
    duplicate keys, bounded depth, no NUL or lone surrogate). DRF reads the body as a stream, past
    Django's own check, so the limit is enforced here: by the declared length first, then by what is
    really read."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if limit is not None and declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge()
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise PayloadTooLarge()
        try:
            return strict.loads(raw)
        except strict.BadInput as error:
            raise exceptions.ValidationError(error.as_dict()) from None


class CursorPagination(pagination.CursorPagination):
    """DRF's cursor pagination, refusing a forged cursor whose position the database would choke on:
    the position must be a value of the ordering's field (a whole number in range for an integer id)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    _position_field: Field[Any, Any] | None = None

    def get_page_size(self, request: Request) -> int | None:
        """`page_size` from 1 up (above the maximum: the maximum); anything else, an empty one too, is a
        400, not ignored."""
        name = self.page_size_query_param or ""
        raw = request.query_params.get(name)
        if raw is not None and not (raw.isascii() and raw.isdigit() and int(raw) >= 1):
            raise exceptions.ValidationError({name: [f"must be a whole number from 1, got {raw[:20]!r}"]})
        return super().get_page_size(request)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {**parameter["schema"], "minimum": 1}
        return parameters

    def paginate_queryset(self, queryset: Any, request: Request, view: APIView | None = None) -> list[Any] | None:
        # DRF decodes the cursor inside; the field that orders this queryset is what the position must fit.
        name = self.get_ordering(request, queryset, view)[0].lstrip("-")  # type: ignore[arg-type]
        self._position_field = queryset.model._meta.get_field(name)
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Request) -> pagination.Cursor | None:
        cursor = super().decode_cursor(request)
        if cursor is None or cursor.position is None:
            return cursor
        if not _fits(self._position_field, str(cursor.position)):
            raise exceptions.NotFound(self.invalid_cursor_message)
        return cursor


def _fits(field: Field[Any, Any] | None, position: str) -> bool:
    """Whether a cursor's position is a value the database can compare with `field`."""
    if "\x00" in position or strict.find_problem(position) is not None:
        return False
    if isinstance(field, IntegerField):
        return position.isascii() and position.isdigit() and int(position) <= BIGINT_MAX
    return True


# The OpenAPI account of the two headers, for the reads (ETag) and edits (both) of one row.
ETAG = OpenApiParameter(
    "ETag",
    str,
    OpenApiParameter.HEADER,
    response=[200],
    description="Strong validator of the row's editable values; send it back as If-Match to edit that version only.",
)
IF_MATCH = OpenApiParameter(
    "If-Match",
    str,
    OpenApiParameter.HEADER,
    description="ETag(s) of the version this edit is made on, or `*`: any other version is a 412 and "
    "nothing is written. Without it the edit applies to whatever is stored.",
)


def etag(row: Model) -> str:
    """A strong validator of what people set on `row`: its editable columns, hashed.

    The columns the scheduler moves on its own (`editable=False`: predicted clear times, virtual
    time, `updated_at`) are left out, so a replan does not turn every open edit stale; the counts
    an answer adds around the row are not part of it either.
    """
    values = {field.attname: field.value_from_object(row) for field in row._meta.concrete_fields if field.editable}
    digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()
    return f'"{digest[:32]}"'


def if_match_check(request: Request, current: Callable[[], Model]) -> None:
    """Refuse (412) a write whose `If-Match` names neither the current ETag of the row nor `*`;
    without the header, write as asked.

    Call it inside the write's transaction with `current` reading the row under the lock its service
    takes (`select_for_update`): no other write lands between the check and this one. A weak
    validator (`W/"..."`) never matches: an edit needs the exact version.
    """
    header = request.headers.get("If-Match")
    if header is None:
        return
    row = current()
    tags = {tag.strip() for tag in header.split(",")}
    if "*" in tags or etag(row) in tags:
        return
    raise PreconditionFailed(
        f"the {row._meta.verbose_name} changed since the If-Match ETag was read: nothing was written; "
        "GET it again (the ETag header) and resend the change"
    )


def with_etag(response: Response, row: Model) -> Response:
    response["ETag"] = etag(row)
    return response


class FairschedAPIView:
    """Mixed into every API view: JSON bodies only, with the size limit."""

    parser_classes: Sequence[type[BaseParser]] = [LimitedJSONParser]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map domain errors to HTTP: `ServiceError` -> its status with `{"field": ["message"]}`,
    `QueueFull` -> 429 with Retry-After (none for a held org), an oversized body -> 413; the rest as
    DRF does."""
    if isinstance(exc, ServiceError):
        response = Response(exc.as_dict(), status=exc.status)
        if isinstance(exc, QueueFull) and exc.retry_after is not None:
            response["Retry-After"] = str(exc.retry_after)
        return response
    # Imported here: this module is loaded while DRF's settings (and so its views module) still load.
    from rest_framework.views import exception_handler

    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    return exception_handler(exc, context)
