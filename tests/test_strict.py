"""`common.strict.loads`: what its cheaper checks may skip, it still refuses."""

from __future__ import annotations

import json

import pytest
from django.http import QueryDict
from rest_framework import serializers

from common import strict
from common.strict import StrictCharField, StrictIntegerField, StrictSerializer


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": "half \ud800 a pair"}', "must not contain lone surrogates (text must be valid Unicode)"),
        ('{"a": "nul \\u0000"}', "must not contain NUL characters"),
        ('{"a": "half \\ud800 a pair"}', "must not contain lone surrogates (text must be valid Unicode)"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_in_text_and_in_bytes(text: str, message: str) -> None:
    with pytest.raises(strict.BadInput) as error:
        strict.loads(text)
    assert error.value.as_dict() == {"a": [message]}
    if "\ud800" not in text:
        with pytest.raises(strict.BadInput) as error:
            strict.loads(text.encode())
        assert error.value.as_dict() == {"a": [message]}


def test_a_raw_nul_is_not_json() -> None:
    with pytest.raises(strict.BadInput, match="not valid JSON"):
        strict.loads(b'{"a": "nul \x00"}')


def test_a_bulk_body_beyond_ascii_reads_as_json_does() -> None:
    body = {"items": [{"external_id": f"\u00e9-{i}", "payload": {"s": "\U0001f600", "n": i}} for i in range(300)]}
    for raw in (json.dumps(body), json.dumps(body, ensure_ascii=False), json.dumps(body).encode()):
        assert strict.loads(raw) == body


class _Body(StrictSerializer):
    name = StrictCharField(max_length=5)
    count = StrictIntegerField(required=False, default=1)

    def validate_name(self, value: str) -> str:
        return value.upper()


class _Nested(StrictSerializer):
    items = serializers.ListField(child=_Body())


def test_a_strict_serializer_builds_its_fields_once_and_validates_each_body_alone() -> None:
    bad, good = _Body(data={"name": "toolong", "count": "2"}), _Body(data={"name": "ab"})
    assert bad.fields is good.fields
    assert not bad.is_valid()
    assert good.is_valid(), good.errors
    assert set(bad.errors) == {"name", "count"}
    assert good.validated_data == {"name": "AB", "count": 1}
    assert not _Body(data={"name": "ab", "extra": 1}).is_valid()


def test_partial_and_nested_serializers_build_their_own_fields() -> None:
    partial = _Body(data={"count": 2}, partial=True)
    assert partial.fields is not _Body().fields
    assert partial.is_valid(), partial.errors
    assert partial.validated_data == {"count": 2}
    first, second = _Nested(data={"items": [{"name": "a"}]}), _Nested(data={"items": [{"name": "toolong"}]})
    assert first.fields is not second.fields
    assert first.is_valid()
    assert not second.is_valid()
    assert first.validated_data == {"items": [{"name": "A", "count": 1}]}


class _Query(strict.StrictQuerySerializer):
    state = strict.CommaChoiceField(choices=["queued", "running", "paused"], required=False)
    org = serializers.CharField(required=False)


def _query(text: str) -> strict.StrictQuerySerializer:
    query = _Query(data=QueryDict(text))
    query.is_valid()
    return query


def test_a_query_takes_its_fields_once_and_several_choices_with_commas() -> None:
    assert _query("state=queued,%20running&org=acme&cursor=x&page_size=5").validated_data == {
        "state": ["queued", "running"],
        "org": "acme",
    }
    assert _query("colour=red&org=acme").errors == {"colour": ["unknown query parameter"]}
    assert "once" in _query("org=a&org=b").errors["org"][0]
    assert "state=queued,running" in _query("state=queued&state=running").errors["state"][0]
    assert "once" in _query("page_size=1&page_size=2").errors["page_size"][0]
    assert "'bogus'" in _query("state=queued,bogus").errors["state"][0]
    assert "state" in _query("state=,").errors
