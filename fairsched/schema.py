"""The OpenAPI schema's account of errors, added to every operation after drf-spectacular builds it.

Every error body is an object whose keys name what is at fault: a field with its messages
(`{"external_id": ["..."]}`), `detail` when nothing more precise applies (each status has its own
schema, `Error<status>`, whose example is what the API answers), and for a bulk submission
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
# What the API answers for each status (common/api.py's exception handler): a service's refusal is the
# field at fault with its messages (400, 404, 409, a full queue's 429 with `held`), DRF's own refusals
# one `detail` string (401, 403, 413, 415, and a rate's 429).
ERROR_EXAMPLES: dict[str, dict[str, Any]] = {
    "400": {"workflow": ["This field is required."]},
    "401": {"detail": "Invalid token."},
    "403": {"detail": "Only staff may do this."},
    "404": {"detail": ["chart not found"]},
    "409": {"state": ["chart 1042 is running and cannot be cancelled"]},
    "412": {
        "detail": [
            "the org changed since the If-Match ETag was read: nothing was written; "
            "GET it again (the ETag header) and resend the change"
        ]
    },
    "413": {"detail": "The request body is too large."},
    "415": {"detail": 'Unsupported media type "text/plain" in request.'},
    "429": {"org": ["org acme has 1000 waiting charts; its queue limit is 1000"], "held": False},
}
# Examples of values that look like the real thing, for properties and parameters of these names.
EXAMPLES: dict[str, str] = {"org": "acme", "external_id": "chart-0001", "workflow": "render-report"}
WRITES = frozenset({"post", "put", "patch", "delete"})
WITH_BODY = frozenset({"post", "put", "patch"})
# Request bodies that need at least one of these fields (the server answers 400 to an empty one).
AT_LEAST_ONE_OF: dict[str, tuple[str, ...]] = {
    "PrioritizeRequest": ("high_priority", "priority"),
    "PriorityChangeRequest": ("high_priority", "priority"),
}
# Request bodies of optional fields that must name at least one (every property is a field).
AT_LEAST_ONE_FIELD = frozenset({"PatchedWorkflowUpdateRequest"})
# Request bodies that take exactly one of several forms (the server answers 400 to any other), each
# with its description.
ONE_OF: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "ApiTokenIssueRequest": (
        "Either an org (an org token; staff absent or false) or staff: true (a staff token; org absent or null).",
        [
            {"required": ["org"], "properties": {"org": {"type": "string"}, "staff": {"enum": [False]}}},
            {
                "required": ["staff"],
                "properties": {"staff": {"enum": [True]}, "org": {"nullable": True, "enum": [None]}},
            },
        ],
    ),
}
# The bodies above that an operation cannot do without (no body at all is a 400 too).
NEEDS_A_FIELD = frozenset({*AT_LEAST_ONE_OF, *AT_LEAST_ONE_FIELD, *ONE_OF})


def _error_schema(code: str) -> dict[str, Any]:
    messages = {"type": "array", "items": {"type": "string"}}
    schema: dict[str, Any] = {
        "type": "object",
        "description": ERRORS[code],
        "minProperties": 1,
        "properties": {"detail": {"oneOf": [{"type": "string"}, messages]}},
        "additionalProperties": {
            "oneOf": [
                messages,
                {"type": "string"},
                {"type": "boolean"},
                {"type": "object", "description": "Errors of the items of a list, by index."},
            ]
        },
        "example": ERROR_EXAMPLES[code],
    }
    if code == "429":
        schema["properties"]["held"] = {
            "type": "boolean",
            "description": "A full queue: whether the org is held (its queue moves only once released).",
        }
    return schema


def _response(code: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": ERRORS[code],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}{code}"}}},
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


def _with_examples(schema: dict[str, Any]) -> None:
    """Real-looking examples for the properties named in EXAMPLES; `payload` typed as the object it is."""
    for name, prop in schema.get("properties", {}).items():
        if name in EXAMPLES and prop.get("type") == "string":
            prop.setdefault("example", EXAMPLES[name])
        if name == "payload" and "type" not in prop:
            prop["type"] = "object"


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook.

    1. Add an `Error<status>` schema per error status, each with the example of its real answer.
    2. Give each operation the error answers it can give (see the module's list), keeping the
       description of any it documents itself (with the status's body schema if it names none); its
       org slug, external id and workflow parameters get real-looking examples.
    3. Properties named in EXAMPLES get real-looking examples, and `payload` (a JSON object) its type.
    4. Request bodies refuse unknown keys (`additionalProperties: false`), and those that need one of
       several fields say so (`anyOf` of `required`), as do those of exclusive forms (`oneOf`).
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for code in ERRORS:
        schemas[f"{ERROR_SCHEMA}{code}"] = _error_schema(code)
    for path, operations in result.get("paths", {}).items():
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
            for code, response in responses.items():
                if code in ERRORS and "content" not in response:
                    response["content"] = _response(code)["content"]
            body = operation.get("requestBody", {})
            ref = body.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
            if ref.rsplit("/", 1)[-1] in NEEDS_A_FIELD:
                body["required"] = True  # an empty request is refused as the empty object is
            for parameter in operation.get("parameters", []):
                name = parameter.get("name")
                if name == "slug" and path.startswith("/api/v1/orgs/{slug}/"):
                    parameter.get("schema", {}).setdefault("example", EXAMPLES["org"])
                elif name in EXAMPLES:
                    parameter.get("schema", {}).setdefault("example", EXAMPLES[name])
    for name, schema in schemas.items():
        _with_examples(schema)
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
        if name in AT_LEAST_ONE_FIELD:
            schema["minProperties"] = 1
        if name in ONE_OF:
            schema["description"], schema["oneOf"] = ONE_OF[name]
    return result
