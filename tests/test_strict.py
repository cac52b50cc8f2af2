"""`common.strict.loads`: what its cheaper checks may skip, it still refuses."""

from __future__ import annotations

import json

import pytest

from common import strict


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
