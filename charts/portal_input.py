"""What the portal's forms send, read into the API's bulk items: one chart from the form, or a CSV or
JSON file of many. The items then go through the API's own parsing (`parse_bulk_items`) and the same
services, so the portal has no rules of its own; this module only turns text into items and says
where in the file each item came from, so that an error names the row (and line) and the field.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from charts.serializers import ITEM_KEYS, parse_bulk_items
from charts.services import ChartRequest
from common import strict
from common.errors import InvalidInput

REQUIRED_COLUMNS = ("workflow", "external_id")
TRUE_WORDS = frozenset({"true", "yes", "1"})
FALSE_WORDS = frozenset({"false", "no", "0", ""})


@dataclass(frozen=True)
class Upload:
    """The items of a file, and for each, where it is in the file ("row 3 (line 4)")."""

    items: list[ChartRequest]
    rows: list[str]


def item_from_form(fields: Mapping[str, str]) -> ChartRequest:
    """One chart from the form's text (`item_read`), read as the API reads an item (`parse_bulk_items`),
    with every problem of its text: the submission's rule then reports them all at once."""
    item, problems = item_read(fields)
    (parsed,) = parse_bulk_items([item])
    return replace(parsed, problems={**parsed.problems, **problems})


def item_read(fields: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """One chart from form or CSV text: `priority` a whole number, `payload` a JSON object,
    `high_priority` true or false, `due_at` ISO 8601 with its zone; empty means the API's default.
    Returns the item and what is wrong with its text by field (a field at fault is left out of the item)."""
    problems: dict[str, list[str]] = {}
    # What strict JSON refuses in the API's bodies (NUL, lone surrogates), refused here in form text too.
    problem = strict.find_problem(dict(fields))
    if problem is not None:
        problems[problem.field] = [f"{problem.field} {problem.message}"]
    item: dict[str, Any] = {key: fields[key] for key in REQUIRED_COLUMNS if key in fields and key not in problems}
    priority = fields.get("priority", "").strip()
    if priority and "priority" not in problems:
        if priority.lstrip("+-").isascii() and priority.lstrip("+-").isdigit():
            item["priority"] = int(priority)
        else:
            problems["priority"] = [f"priority must be a whole number, got {priority[:20]!r}"]
    payload = fields.get("payload", "").strip()
    if payload and "payload" not in problems:
        try:
            item["payload"] = strict.loads(payload)
        except strict.BadInput as bad:
            problems["payload"] = [f"The payload must be valid JSON: {json_words(payload, bad)}"]
    due_at = fields.get("due_at", "").strip()
    if due_at and "due_at" not in problems:
        item["due_at"] = due_at  # read, and judged, as the API's (`parse_bulk_items`)
    high = fields.get("high_priority", "").strip().lower()
    if "high_priority" not in problems and high not in TRUE_WORDS | FALSE_WORDS:
        problems["high_priority"] = [f"high_priority must be true or false, got {high[:20]!r}"]
    elif high in TRUE_WORDS:
        item["high_priority"] = True
    return item, problems


JSON_MISTAKES = {
    "Expecting property name enclosed in double quotes": "a property name in double quotes is missing",
    "Expecting value": "a value is missing",
    "Expecting ',' delimiter": "a comma is missing",
    "Expecting ':' delimiter": "a colon is missing",
    "Unterminated string starting at": "a text in quotes is not closed",
    "Extra data": "there is more after the end of the object",
    "Invalid control character at": "a text in quotes holds a line break or control character",
    "Invalid \\escape": "a backslash starts an unknown escape",
    "Invalid \\uXXXX escape": "a \\u escape needs four hexadecimal digits",
}


def json_words(text: str, bad: strict.BadInput) -> str:
    """What is wrong with a JSON text in a customer's words, and where ("a comma is missing at line 2,
    column 7"); a refusal of strict JSON's own (a repeated key, NaN) keeps its words."""
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"{JSON_MISTAKES.get(error.msg, error.msg.lower())} at line {error.lineno}, column {error.colno}"
    except ValueError:
        pass
    return bad.message


def upload_read(*, name: str, raw: bytes, org_slug: str) -> Upload:
    """A file of charts: JSON (a list of items, or the API's bulk body `{"items": [...]}`) when its
    name ends in .json or its text starts with `[` or `{`, else CSV with a header row naming the
    columns (`workflow`, `external_id`, and optionally `priority`, `payload`, `high_priority`, `due_at`). A
    JSON body that names an org must name `org_slug`, the org whose page it was sent from."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("the file must be UTF-8 text (CSV or JSON)", field="file") from None
    if not text.strip():
        raise InvalidInput("the file is empty", field="file")
    if name.lower().endswith(".json") or text.lstrip()[:1] in ("[", "{"):
        return _json_upload(text, org_slug)
    return _csv_upload(text)


def _json_upload(text: str, org_slug: str) -> Upload:
    try:
        body = strict.loads(text)
    except strict.BadInput as bad:
        raise InvalidInput(f"the file is not valid JSON: {bad.message}", field="file") from None
    if isinstance(body, dict):
        if body.keys() - {"items", "org"}:
            unknown = sorted(body.keys() - {"items", "org"})[0]
            raise InvalidInput(f"unknown key {unknown[:40]!r}: a JSON file is a list of charts", field="file")
        if body.get("org", org_slug) != org_slug:
            raise InvalidInput(f"the file names another org than {org_slug!r}; nothing was submitted", field="org")
        body = body.get("items")
    items = parse_bulk_items(body)
    return Upload(items=items, rows=[f"row {index + 1}" for index in range(len(items))])


def _csv_upload(text: str) -> Upload:
    """1. Read the header: the required columns must be there, no unknown or repeated column.
    2. Read each row into an item, noting its line, and what is wrong with its text.
    3. Hand the items to `parse_bulk_items`, as the API does with a JSON body, each with the problems
       of its text (a row of the wrong width has no item: only that problem)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [column.strip() for column in next(reader)]
        missing = [column for column in REQUIRED_COLUMNS if column not in header]
        unknown = [column for column in header if column not in ITEM_KEYS]
        if missing or unknown or len(set(header)) != len(header):
            raise InvalidInput(
                f"the header row must name the columns workflow, external_id and optionally priority, payload,"
                f" high_priority, due_at once each; got {', '.join(header)[:200]!r}",
                field="file",
            )
        items: list[dict[str, Any]] = []
        rows: list[str] = []
        text_problems: list[dict[str, list[str]]] = []
        for values in reader:
            if not any(value.strip() for value in values):
                continue
            rows.append(f"row {len(items) + 1} (line {reader.line_num})")
            if len(values) != len(header):
                items.append({})
                text_problems.append({"detail": [f"has {len(values)} values for {len(header)} columns"]})
                continue
            item, problems = item_read(dict(zip(header, values, strict=True)))
            items.append(item)
            text_problems.append(problems)
    except csv.Error as bad:
        raise InvalidInput(f"the file is not valid CSV at line {reader.line_num}: {bad}", field="file") from None
    if not items:
        raise InvalidInput("the file has a header but no charts", field="file")
    parsed = [
        replace(item, problems=problems if "detail" in problems else {**item.problems, **problems})
        for item, problems in zip(parse_bulk_items(items), text_problems, strict=True)
    ]
    return Upload(items=parsed, rows=rows)
