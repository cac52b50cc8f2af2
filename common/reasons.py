"""A lever's reason in the API: the body that carries it (or the query, for a DELETE), read strictly."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from common.errors import InvalidInput
from common.strict import ReasonField, StrictQuerySerializer, StrictSerializer


class ReasonSerializer(StrictSerializer):
    reason = ReasonField()


class ReasonQuerySerializer(StrictQuerySerializer):
    """A lever that is a DELETE takes its reason in the query as well (`?reason=`): some clients and
    proxies drop a DELETE's body."""

    reason = ReasonField()


def reason_read(body: object, serializer: type[serializers.Serializer[Any]] | None = None) -> str:
    """A lever's body: empty, or an object with an optional `reason` (`ReasonSerializer`, or the
    lever's own `serializer`, e.g. `orgs.serializers.HoldSerializer`); anything else (null, a list, a
    string) is a 400, not read as no reason."""
    if not isinstance(body, dict):
        raise InvalidInput("the body must be a JSON object (with an optional reason), or empty", field="detail")
    reason = (serializer or ReasonSerializer)(data=body)
    reason.is_valid(raise_exception=True)
    text: str = reason.validated_data["reason"]
    return text
