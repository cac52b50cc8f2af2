"""Strict, predictable input: what every interface accepts, decided in one place.

A JSON body is UTF-8, has no duplicate keys, no NaN or Infinity, nests at most `MAX_JSON_DEPTH` levels
and holds no NUL character or lone surrogate anywhere (PostgreSQL refuses both in text and jsonb). An id
(external id, workflow name) is a string without control or invisible format characters. Typed API
fields take their JSON type only: `5` is not a string, `"5"` is not a number, `1` is not `true`; and
an object with a key nobody reads is refused rather than half understood.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from django.core.validators import RegexValidator
from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict

# Deeper than any real payload; far below where Python's recursion (in json and in Django's encoder) fails.
MAX_JSON_DEPTH = 32
# Control (Cc), format (Cf: zero-width and bidi overrides) and surrogate (Cs) characters.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
# PostgreSQL's integer columns (PositiveIntegerField and IntegerField).
MAX_INT32 = 2**31 - 1
_FORBIDDEN_IN_TEXT = re.compile("[\x00\ud800-\udfff]")
# JSON escapes that decode to a NUL or to half of a surrogate pair (a whole pair is fine: the walk decides).
_SUSPECT_ESCAPES = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})", re.IGNORECASE)
_CONTAINERS = (dict, list)


class BadInput(ValueError):
    """Input refused before it reaches a view; `field` is the top-level key at fault ("detail": none)."""

    def __init__(self, message: str, *, field: str = "detail") -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, list[str]]:
        return {self.field: [self.message]}


class _Duplicated(dict[str, Any]):
    """An object that repeated a key; the walk refuses it, naming the top-level key it sits under."""

    duplicate: str = ""


def _mark_duplicate(pairs: list[tuple[str, Any]], result: dict[str, Any]) -> _Duplicated:
    marked = _Duplicated(result)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.duplicate = key
            break
        seen.add(key)
    return marked


def _no_constant(name: str) -> Any:
    raise BadInput(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as infinity, which PostgreSQL's jsonb refuses
        raise BadInput(f"{text[:30]} is out of range for a JSON number")
    return value


def loads(raw: bytes | str) -> Any:
    """Parse a JSON body strictly (see the module's rules); refusals raise `BadInput`.

    1. Decode UTF-8 and parse, refusing NaN, Infinity and numbers out of range, and marking objects
       that repeat a key; a body nested deeper than Python's parser can go is refused here.
    2. Measure the depth, level by level (containers only: bench/bench_strict_json.py).
    3. Only if something was marked, or the text holds an escaped NUL or surrogate, walk everything
       for the first problem, naming the top-level key where it sits.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise BadInput("the body must be UTF-8 encoded JSON") from None
    duplicated: list[bool] = []

    def keep_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        duplicated.append(True)
        return _mark_duplicate(pairs, result)

    try:
        data = json.loads(text, object_pairs_hook=keep_duplicates, parse_constant=_no_constant, parse_float=_finite)
    except BadInput:
        raise
    except RecursionError:
        raise BadInput(f"the JSON is nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as error:
        raise BadInput(f"the body is not valid JSON: {error}") from None
    # A NUL or a surrogate as itself (not escaped) can only be in text given as a string: the parser
    # refuses raw control characters, and strict UTF-8 decoding refuses encoded surrogates.
    raw_suspect = isinstance(raw, str) and not text.isascii() and _FORBIDDEN_IN_TEXT.search(text)
    if duplicated or _depth(data) > MAX_JSON_DEPTH or _SUSPECT_ESCAPES.search(text) or raw_suspect:
        problem = find_problem(data)
        if problem is not None:
            raise problem
    return data


def _depth(data: object) -> int:
    """How deeply containers nest in a parsed value (a scalar: 0), counted level by level."""
    level: list[Any] = [data] if type(data) in _CONTAINERS else []
    depth = 0
    while level and depth <= MAX_JSON_DEPTH:
        depth += 1
        below: list[Any] = []
        for value in level:
            below += [item for item in (value.values() if type(value) is dict else value) if type(item) in _CONTAINERS]
        level = below
    return depth


def find_problem(data: object, *, max_depth: int = MAX_JSON_DEPTH) -> BadInput | None:
    """The first problem in a parsed JSON value (a repeated key, too deep, a NUL or a lone surrogate).

    Iterative: a value of any depth is walked with a list, never with recursion."""
    stack: list[tuple[object, int, str]] = []
    if isinstance(data, _Duplicated):
        return BadInput(f"duplicate key {_shown(data.duplicate)}", field=_clean(data.duplicate))
    if isinstance(data, dict):
        stack.extend((value, 1, _clean(key)) for key, value in data.items())
        for key in data:
            if isinstance(key, str) and _FORBIDDEN_IN_TEXT.search(key):
                return BadInput(_text_problem(key), field=_clean(key) or "detail")
    else:
        stack.append((data, 0, "detail"))
    while stack:
        value, depth, field = stack.pop()
        if depth > max_depth:
            return BadInput(f"the JSON is nested too deeply (at most {max_depth} levels)", field=field)
        if isinstance(value, str):
            if _FORBIDDEN_IN_TEXT.search(value):
                return BadInput(_text_problem(value), field=field)
        elif isinstance(value, dict):
            if isinstance(value, _Duplicated):
                return BadInput(f"duplicate key {_shown(value.duplicate)}", field=field)
            for key, item in value.items():
                if isinstance(key, str) and _FORBIDDEN_IN_TEXT.search(key):
                    return BadInput(_text_problem(key), field=field)
                stack.append((item, depth + 1, field))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, field) for item in value)
        elif isinstance(value, float) and not math.isfinite(value):
            return BadInput("numbers must be finite", field=field)
    return None


def encoded_is_clean(text: str) -> bool:
    """Whether JSON text that `json` encoded with its ASCII escapes (the default) is certainly free of
    what `find_problem` looks for, judged by the text alone (about a hundred times cheaper than the walk).

    Every NUL or surrogate is escaped in such text, so without `\\u0000` and `\\ud800`-`\\udfff` it holds
    none; a value nested past MAX_JSON_DEPTH needs more than MAX_JSON_DEPTH opening brackets. False
    means "walk it" (a character beyond U+FFFF is a surrogate pair in the text, and brackets inside
    strings count too); the encoder itself refuses non-finite numbers when told `allow_nan=False`.
    """
    return text.count("{") + text.count("[") <= MAX_JSON_DEPTH and not _SUSPECT_ESCAPES.search(text)


def _text_problem(text: str) -> str:
    if "\x00" in text:
        return "must not contain NUL characters"
    return "must not contain lone surrogates (text must be valid Unicode)"


def _clean(key: object) -> str:
    """A key fit to name a field in an error body."""
    return _FORBIDDEN_IN_TEXT.sub("", str(key))[:100] or "detail"


def _shown(key: str) -> str:
    return repr(_clean(key))


def id_problem(value: object, *, name: str) -> str | None:
    """Why `value` is not an acceptable id (a non-empty string of visible characters), or None."""
    if not isinstance(value, str) or not value.strip():
        return f"{name} must be a non-empty string"
    if value.isascii() and value.isprintable():
        return None  # ASCII's only hidden characters are its controls (Cc), which are not printable
    for char in value:
        if unicodedata.category(char) in HIDDEN_CATEGORIES:
            return f"{name} must not contain control or invisible characters (found U+{ord(char):04X})"
    return None


# DRF fields and serializers that take JSON's own types only ---------------------------------------


# A character that is not whitespace as `str.strip` (DRF's trimming) sees it: a string that must not be
# blank holds one. Spelled out, not `\S`, which regular expression dialects read differently.
NOT_BLANK = RegexValidator(r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")


class StrictCharField(serializers.CharField):
    """A string, never a number or boolean turned into one, of at most `max_length` characters as sent
    (before trimming, as the schema's maxLength counts). `visible=True` also refuses control and
    invisible format characters (for ids). One that must not be blank says so in the schema too (its
    pattern, `NOT_BLANK`)."""

    def __init__(self, *, visible: bool = False, **kwargs: Any) -> None:
        self.visible = visible
        super().__init__(**kwargs)
        if not self.allow_blank and self.trim_whitespace and not isinstance(self, serializers.SlugField):
            self.validators.append(NOT_BLANK)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if self.visible and value:
            problem = id_problem(value, name=self.field_name or "the value")
            if problem is not None:
                raise serializers.ValidationError(problem)
        return value


class StrictSlugField(StrictCharField, serializers.SlugField):
    pass


# Why a lever was pulled, in one line: every lever's body takes it, stored in its history.
REASON_MAX_LENGTH = 500


def reason_problem(value: str) -> str | None:
    """Why `value` is not an acceptable reason (too long, or holding control or invisible
    characters), or None; the admin's and the portal's forms check with it as the API does."""
    if len(value) > REASON_MAX_LENGTH:
        return f"reason must be at most {REASON_MAX_LENGTH} characters (got {len(value)})"
    if value and not (value.isascii() and value.isprintable()):
        for char in value:
            if unicodedata.category(char) in HIDDEN_CATEGORIES:
                return f"reason must not contain control or invisible characters (found U+{ord(char):04X})"
    return None


class ReasonField(StrictCharField):
    """A lever's optional reason: stripped, at most `REASON_MAX_LENGTH` characters, no control or
    invisible characters (a newline included: it is one line); absent or empty is ""."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            f"Why, in one line (at most {REASON_MAX_LENGTH} characters): kept in the history, for staff.",
        )
        # The same words as `reason_problem`, which the admin's and the portal's forms give.
        kwargs.setdefault("error_messages", {"max_length": "reason must be at most {max_length} characters"})
        super().__init__(required=False, allow_blank=True, default="", max_length=REASON_MAX_LENGTH, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        problem = reason_problem(value)
        if problem is not None:
            raise serializers.ValidationError(problem)
        return value


class StrictIntegerField(serializers.IntegerField):
    """A JSON whole number (not a string, a float or a boolean), within PostgreSQL's integer unless
    told otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_value", MAX_INT32)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictFloatField(serializers.FloatField):
    """A JSON number (not a string or a boolean)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """`true` or `false`, not "yes", 1 or "true"."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


@extend_schema_field({"type": "boolean"})
class QueryBooleanField(serializers.Field[bool, bool, bool, Any]):
    """A query parameter that is `true` or `false`, nothing else (not "1", "yes" nor "True")."""

    SPELLINGS: ClassVar[dict[str, bool]] = {"true": True, "false": False}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, str) or data not in self.SPELLINGS:
            raise serializers.ValidationError(f"must be true or false, got {str(data)[:40]!r}")
        return self.SPELLINGS[data]

    def to_representation(self, value: bool) -> bool:
        return value


class StrictSerializer(serializers.Serializer[Any]):
    """A request body: a JSON object whose every key is a field; unknown keys are refused by name."""

    # Its fields are built once per class, not for every request: DRF deep-copies the declared fields
    # and binds them each time a serializer is made (bench/bench_api.py measures it). Validating keeps
    # nothing in a field: each reads its own options only (no context, no instance), and errors and
    # results stay on the serializer at hand, as do `validate_<field>` and `validate`. Two cases build
    # their own as DRF does: a partial update (the fields read `partial` from their root) and a class
    # holding a nested serializer (whose fields have a parent of their own).

    _fields_once: ClassVar[dict[type[StrictSerializer], BindingDict | None]] = {}

    @property
    def fields(self) -> BindingDict:
        cls = type(self)
        if cls not in StrictSerializer._fields_once and not self.partial:
            built = self._built_fields()
            nested = any(isinstance(field, serializers.BaseSerializer) for field in _with_children(built.values()))
            StrictSerializer._fields_once[cls] = None if nested else built
        shared = StrictSerializer._fields_once.get(cls)
        if shared is None or self.partial:
            own: BindingDict | None = self.__dict__.get("_own_fields")
            if own is None:
                own = self.__dict__["_own_fields"] = self._built_fields()
            return own
        return shared

    def _built_fields(self) -> BindingDict:
        """DRF's `Serializer.fields`: the declared fields, copied and bound to this serializer."""
        fields = BindingDict(self)
        for name, field in self.get_fields().items():
            fields[name] = field
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(key) for key in data.keys() - self.fields.keys())
            if unknown:
                raise serializers.ValidationError({key: ["unknown field"] for key in unknown})
        return super().to_internal_value(data)


_UNBUILT = BindingDict(serializers.Serializer())


def _with_children(
    fields: Iterable[serializers.Field[Any, Any, Any, Any]],
) -> Iterator[serializers.Field[Any, Any, Any, Any]]:
    """The fields and the children of list and dict fields, at every level."""
    pending = list(fields)
    while pending:
        field = pending.pop()
        yield field
        child = getattr(field, "child", None)
        if child is not None:
            pending.append(child)


# Query parameters ------------------------------------------------------------------------------------

# What every paginated list takes besides its filters: the paginator's (`common.api.CursorPagination`)
# and DRF's renderer choice (`?format=api` opens the browsable page, `?format=json` the JSON).
PAGINATION_PARAMETERS = frozenset({"cursor", "page_size", "format"})


class StrictQuerySerializer(serializers.Serializer[Any]):
    """A list's query parameters: each filter is a field, given at most once; an unknown parameter is
    refused by name, as is a repeated one (a filter of several values takes them with commas:
    `CommaChoiceField`). Pagination's own parameters and `format` are left to DRF."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, QueryDict):
            errors: dict[str, list[str]] = {}
            for key in sorted(data.keys()):
                if key not in self.fields and key not in PAGINATION_PARAMETERS:
                    errors[key] = ["unknown query parameter"]
                elif len(data.getlist(key)) > 1:
                    errors[key] = [self._repeated(key, data.getlist(key))]
            if errors:
                raise serializers.ValidationError(errors)
            data = {key: data[key] for key in data if key in self.fields}
        return super().to_internal_value(data)

    def _repeated(self, key: str, values: list[str]) -> str:
        if isinstance(self.fields.get(key), CommaChoiceField):
            joined = ",".join(value[:40] for value in values[:5])
            return f"give {key} once; for several values separate them with commas: {key}={joined}"
        return f"give {key} once"


class PageQuerySerializer(StrictQuerySerializer):
    """A list without filters: `cursor` and `page_size`, nothing else."""


@extend_schema_field(OpenApiTypes.STR)
class CommaChoiceField(serializers.Field[list[str], str, str, Any]):
    """Several choices in one query parameter, separated by commas (`state=queued,running`), spaces
    allowed around each. The schema states the rule as the pattern the value must match, and the
    field judges by that same pattern."""

    def __init__(self, *, choices: Iterable[str], **kwargs: Any) -> None:
        self.choices = list(choices)
        one = "(?:" + "|".join(re.escape(choice) for choice in self.choices) + ")"
        self.pattern = re.compile(f" *{one} *(?:, *{one} *)*")
        # The field's schema (drf-spectacular reads this attribute): a string of that pattern.
        self._spectacular_annotation = {"field": {"type": "string", "pattern": f"^{self.pattern.pattern}$"}}
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a comma-separated list")
        values = [value.strip(" ") for value in data.split(",")]
        if not self.pattern.fullmatch(data):
            unknown = [value for value in values if value not in self.choices]
            shown = ", ".join(repr(value[:40]) for value in unknown[:5]) or repr(data[:40])
            raise serializers.ValidationError(f"unknown {shown}; give one or more of {', '.join(self.choices)}")
        return values

    def to_representation(self, value: list[str]) -> str:
        return ",".join(value)
