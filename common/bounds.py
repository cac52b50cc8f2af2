"""The bounds of the levers' values, each written once, and the one check of a value against them.

Every lever has a service that checks its input (`Whole.check`, `Number.check`: an `InvalidInput`
naming the field, HTTP 400). The other surfaces take their limits from the same bound instead of
writing the numbers again: the API's serializers (`Whole.limits` as `min_value`/`max_value`), the
admin's form fields, the what-if preview. The bounds themselves live beside their levers
(`orgs.levers.WEIGHT`, `knobs.levers.CONFIG_BOUNDS`, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from common.errors import InvalidInput
from common.strict import MAX_INT32


@dataclass(frozen=True)
class Whole:
    """A whole number from `minimum` to `maximum`, both included (at most a PostgreSQL integer)."""

    minimum: int
    maximum: int = MAX_INT32

    def check(self, value: object, *, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{field} must be a whole number, got {value!r}", field=field)
        if not self.minimum <= value <= self.maximum:
            raise InvalidInput(f"{field} must be between {self.minimum} and {self.maximum}, got {value}", field=field)
        return value

    def check_optional(self, value: object, *, field: str) -> int | None:
        """None (no limit, no cap, the default) or a whole number in the bound."""
        return None if value is None else self.check(value, field=field)

    @property
    def limits(self) -> dict[str, Any]:
        """The bound as a serializer's or form field's `min_value` and `max_value`."""
        return {"min_value": self.minimum, "max_value": self.maximum}


@dataclass(frozen=True)
class Number:
    """A finite number from `minimum` (excluded when `above`) to `maximum` (None: no maximum)."""

    minimum: float
    maximum: float | None = None
    above: bool = False

    def check(self, value: object, *, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidInput(f"{field} must be a number, got {value!r}", field=field)
        too_low = value <= self.minimum if self.above else value < self.minimum
        if too_low or (self.maximum is not None and value > self.maximum):
            raise InvalidInput(f"{field} must be {self.describe()}, got {value}", field=field)
        return float(value)

    @property
    def schema(self) -> dict[str, Any]:
        """The bound as an OpenAPI (3.0) number schema."""
        schema: dict[str, Any] = {"type": "number", "format": "double", "minimum": self.minimum}
        if self.above:
            schema["exclusiveMinimum"] = True
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema

    def describe(self) -> str:
        bound = f"> {self.minimum:g}" if self.above else f">= {self.minimum:g}"
        return bound if self.maximum is None else f"{bound} and <= {self.maximum:g}"
