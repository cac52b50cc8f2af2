"""Domain errors raised by services; each interface (API, admin, CLI) maps them to its own form."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A request the scheduler refuses. `field` names the input at fault when there is one."""

    status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, Any]:
        return {self.field or "detail": [self.message]}


class InvalidInput(ServiceError):
    """Bad input: a value out of range, an unknown org or workflow."""


class FieldsInvalid(InvalidInput):
    """Several fields of one request are bad, each with its messages (`field` and `message`: the first)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        field, messages = next(iter(errors.items()))
        super().__init__(messages[0], field=field)
        self.errors = errors

    def as_dict(self) -> dict[str, Any]:
        return dict(self.errors)


class FieldsForbidden(FieldsInvalid):
    """The request's only faults are levers the caller may not pull, each named."""

    status = 403


class BulkInvalid(InvalidInput):
    """Some items of a bulk request are bad; nothing of the request was written. `org`: why the
    request would pass the org's queue limit as well (said with the items' errors, not after them)."""

    def __init__(self, errors: dict[int, dict[str, list[str]]], *, org: list[str] | None = None) -> None:
        super().__init__(f"{len(errors)} item(s) are invalid; nothing was submitted", field="items")
        self.errors = errors
        self.org = org

    def as_dict(self) -> dict[str, Any]:
        items = {"items": {str(i): e for i, e in sorted(self.errors.items())}}
        return {**items, "org": self.org} if self.org else items


class NotFound(ServiceError):
    status = 404


class Forbidden(ServiceError):
    """A lever the caller may not pull (an operators' lever asked for by a tenant)."""

    status = 403


class BulkForbidden(BulkInvalid):
    """Some items of a bulk request ask for a lever the caller may not pull; nothing was written."""

    status = 403


class Conflict(ServiceError):
    """The request clashes with the current state (an illegal transition, a reused external id)."""

    status = 409


class PreconditionFailed(ServiceError):
    """The caller's If-Match names a version of the object that is no longer the stored one (HTTP 412)."""

    status = 412


class QueueFull(ServiceError):
    """The org is at its queue limit: admission refused (HTTP 429, with Retry-After when its queue is
    expected to move; a held org's cannot move until it is released, and the body says so)."""

    status = 429

    def __init__(
        self,
        message: str,
        *,
        retry_after: int | None,
        held: bool = False,
        waiting: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message, field="org")
        self.retry_after = retry_after
        self.held = held
        self.waiting = waiting  # charts waiting before this request, and the limit: for customers' words
        self.limit = limit

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "held": self.held}
