"""The OpenAPI schema's account of errors, added to every operation after drf-spectacular builds it.

Every error body is an object whose keys name what is at fault: a field with its messages
(`{"external_id": ["..."]}`), `detail` when nothing more precise applies, and for a bulk submission
the bad items by index (`{"items": {"3": {"workflow": ["..."]}}}`). Which answers an operation can give:

- every operation: 400 (a bad query parameter or body), 401 (no or a bad token), 403 (not allowed),
  404 (not there, or not yours; also a forged pagination cursor), 429 (over a rate or an org's queue
  limit, with Retry-After);
- operations that write: 409 (the current state forbids it); those taking If-Match: 412 (the row
  changed since that ETag was read);
- operations with a body: 413 (past FAIRSCHED_MAX_BODY_BYTES) and 415 (not JSON).
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = "Error"
ERRORS: dict[str, str] = {
    "400": "Invalid input: each key names a field at fault (`detail`: the request as a whole) with its messages.",
    "401": "No credentials, or a token or session that is not valid.",
    "403": "The caller may not do this (staff only, or a read-only membership).",
    "404": "No such object among those the caller can see, or a forged pagination cursor.",
    "409": "The object's current state does not allow this.",
    "412": "If-Match names a version that is no longer the stored one: nothing was written; GET the ETag again.",
    "413": "The request body is larger than FAIRSCHED_MAX_BODY_BYTES.",
    "415": "The request body is not JSON (send Content-Type: application/json).",
    "429": "Over the caller's rate, or over the org's queue limit: retry after Retry-After seconds.",
}
WRITES = frozenset({"post", "put", "patch", "delete"})
WITH_BODY = frozenset({"post", "put", "patch"})
# Request bodies that need at least one of these fields (the server answers 400 to an empty one).
AT_LEAST_ONE_OF: dict[str, tuple[str, ...]] = {"PrioritizeRequest": ("high_priority", "priority")}


def _error_schema() -> dict[str, Any]:
    messages = {"type": "array", "items": {"type": "string"}}
    return {
        "type": "object",
        "description": "Error messages keyed by the field at fault (`detail`: the request as a whole).",
        "minProperties": 1,
        "additionalProperties": {
            "oneOf": [
                messages,
                {"type": "string"},
                {"type": "object", "description": "Errors of the items of a list, by index."},
            ]
        },
        "example": {"external_id": ["external_id must not contain control or invisible characters (found U+0001)"]},
    }


def _response(code: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": ERRORS[code],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}},
    }
    if code == "429":
        response["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before retrying.",
                "schema": {"type": "integer", "minimum": 0},
                "required": True,
            }
        }
    return response


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook.

    1. Add the `Error` schema.
    2. Give each operation the error answers it can give (see the module's list), keeping any it
       documents itself.
    3. Request bodies refuse unknown keys (`additionalProperties: false`), and those that need one of
       several fields say so (`anyOf` of `required`).
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas[ERROR_SCHEMA] = _error_schema()
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if method not in {"get", "post", "put", "patch", "delete", "head", "options"}:
                continue
            codes = ["400", "401", "403", "404", "429"]
            if method in WRITES:
                codes.append("409")
            if any(p.get("in") == "header" and p.get("name") == "If-Match" for p in operation.get("parameters", [])):
                codes.append("412")
            if method in WITH_BODY:
                codes += ["413", "415"]
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(code, _response(code))
    for name, schema in schemas.items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
        if name in AT_LEAST_ONE_OF:
            fields = AT_LEAST_ONE_OF[name]
            properties = schema.get("properties", {})
            # The field's own type without `nullable`: present and not null.
            schema["anyOf"] = [
                {"required": [field], "properties": {field: {"type": properties.get(field, {}).get("type", "string")}}}
                for field in fields
            ]
            schema["description"] = f"At least one of {', '.join(fields)}, not null."
    return result
