"""Writes on charts: submit (one or in bulk), pause, resume, prioritize, move to top, cancel.

Submission is idempotent on (org, external id) and guarded by admission: submissions that must see
each other (to an org with a queue limit, or of many charts at once) take turns on the org's admission
lock, so two concurrent submissions cannot both slip under the queue limit; a single chart of an org
without one waits for nobody (`chart_submit_bulk` says why each lock is there).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, NamedTuple

from celery import current_app
from django.db import connection, transaction
from django.db.models import Max, Min
from django.db.models.base import ModelState
from django.utils import timezone

from charts.levers import PRIORITY, TENANT_PRIORITY, prioritized, tenant_levers_refused
from charts.models import (
    ACTIVE_STATES,
    IN_FLIGHT_STATES,
    PLAN_FIELDS,
    WAITING_STATES,
    Chart,
    ChartEvent,
    ChartState,
    DurationStat,
)
from charts.states import transition, transition_if
from common import strict, tracing
from common.actors import Actor
from common.errors import (
    BulkForbidden,
    BulkInvalid,
    Conflict,
    FieldsForbidden,
    FieldsInvalid,
    InvalidInput,
    NotFound,
    QueueFull,
)
from common.events import changed
from common.rows import instances_where
from knobs.models import SchedulerConfig
from orgs.models import Org, Workflow
from orgs.selectors import turnaround_targets
from orgs.services import org_change_log

MAX_EXTERNAL_ID = 200
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_BULK_ITEMS = 10_000
# One encoder for every payload; NaN and infinities are not JSON, and PostgreSQL's jsonb refuses them.
_PAYLOAD_JSON = json.JSONEncoder(allow_nan=False)
# The first key of the org's admission turn (`_admission_turn`), a two-key advisory lock: that key
# space is apart from the one-key locks of the dispatcher and the replan (scheduling).
ADMISSION_LOCK = 0x61646D74  # "admt"
# The task (scheduling.tasks) that asks Temporal to cancel a cancelled chart's workflow.
CANCEL_WORKFLOW_TASK = "scheduling.tasks.cancel_workflow"


@dataclass(frozen=True)
class ChartRequest:
    """One chart to submit, as parsed by an interface; `problems` are what the interface found wrong
    while reading it (an unknown key, a value of the wrong type), reported with the service's own by
    `chart_submit_bulk`. A field named there is not checked again; `detail` (not an item at all)
    stops every check of the item. `due_at` (a moment with its time zone, in the future): when the
    chart is due; None: its submission plus the org's promise for the workflow, if any."""

    workflow: str
    external_id: str
    payload: Mapping[str, Any] | None = None
    high_priority: bool = False
    priority: int = 0
    due_at: datetime | None = None
    problems: Mapping[str, list[str]] = dataclasses.field(default_factory=dict)


def chart_submit(
    *,
    org: Org,
    workflow: str,
    external_id: str,
    payload: Mapping[str, Any] | None = None,
    high_priority: bool = False,
    priority: int = 0,
    due_at: datetime | None = None,
    actor: Actor,
    problems: Mapping[str, list[str]] | None = None,
) -> tuple[Chart, bool]:
    """Submit one chart. Returns (chart, created); a repeat of the same submission returns the same chart.

    The bulk's rule judges it (`chart_submit_bulk`, one item): every problem of the chart is reported
    at once, by field (`FieldsInvalid`; only refused staff levers: `FieldsForbidden`, 403), with
    those the interface found reading it (`problems`)."""
    item = ChartRequest(workflow, external_id, payload, high_priority, priority, due_at, problems=problems or {})
    try:
        ((chart, created),) = chart_submit_bulk(org=org, items=[item], actor=actor)
    except BulkInvalid as bulk:
        raise _single_error(bulk) from None
    return chart, created


def chart_submit_problems(*, item: ChartRequest, actor: Actor) -> dict[str, list[str]]:
    """What is wrong with one chart, by field, judged without its org (which the caller could not
    name): the first step of `chart_submit_bulk`, so that a submission to an unknown org still hears
    of its other problems in the same answer."""
    return _items_check([item], staff=actor.staff, now=timezone.now()).errors.get(0, {})


class ItemsChecked(NamedTuple):
    """The first step of `chart_submit_bulk`: the problems of the bad items by index, whether staff
    levers refused to a tenant are all that is wrong, the good items' rows and the workflows named."""

    errors: dict[int, dict[str, list[str]]]
    only_refused: bool
    rows: list[StagedRow]
    workflows: dict[str, Workflow]


def _items_check(items: Sequence[ChartRequest], *, staff: bool, now: datetime) -> ItemsChecked:
    """Check every item in one pass (`_item_check`, a repeated external id, and for a tenant the
    staff levers it asked for), writing the row each good one will be."""
    names = list({item.workflow for item in items if isinstance(item.workflow, str)})
    workflows = {workflow.name: workflow for workflow in instances_where(Workflow, 't."name" = ANY(%s)', [names])}
    errors: dict[int, dict[str, list[str]]] = {}
    only_refused = True
    seen: dict[str, int] = {}
    rows: list[StagedRow] = []
    for index, item in enumerate(items):
        problems, payload_value, payload = _item_check(item, workflows, now=now)
        if "external_id" not in problems and isinstance(item.external_id, str):
            if item.external_id in seen:
                problems["external_id"] = [f"repeats item {seen[item.external_id]} of this request"]
            else:
                seen[item.external_id] = index
        only_refused = only_refused and not problems
        if not staff and "detail" not in problems:
            refused = tenant_levers_refused(high_priority=item.high_priority, priority=item.priority)
            problems.update({name: texts for name, texts in refused.items() if name not in problems})
        if problems:
            errors[index] = problems
            continue
        workflow_id = workflows[item.workflow].pk
        rows.append(
            StagedRow(
                index,
                workflow_id,
                item.external_id,
                payload,
                item.high_priority,
                item.priority,
                item.due_at,
                payload_value,
            )
        )
    return ItemsChecked(errors, only_refused, rows, workflows)


def chart_submit_bulk(*, org: Org, items: Sequence[ChartRequest], actor: Actor) -> list[tuple[Chart, bool]]:
    """Submit many charts of one org, all or nothing; a tenant only to an org it writes in (else 404).

    1. Validate every item in one pass (`_items_check`), writing the row each good one will be.
       Every problem of every item is reported together, by index and field (the interface's
       `problems`, the values, a repeated external id and, for a tenant actor, the staff
       levers it asked for), with a repeat under another workflow among the good items and, when
       the org has a queue limit that the request would overflow, that too (`_queue_overflow`: the
       queue is judged for certain in step 5); nothing is written. Refused levers alone are a 403
       (`BulkForbidden`), else a 400.
    2. Read the org under a FOR KEY SHARE lock: until commit its queue limit and hold cannot change
       (every lever of the org locks it FOR UPDATE: `orgs.services._locked`) nor the org go, while
       the org's other submissions, and the dispatcher's plain UPDATEs of the row, go on. Then, if the
       org has a queue limit or more than one chart is written, wait for the org's admission turn
       (`_admission_turn`, held to commit). Why a single chart of an org without limit needs no turn:
       it has nothing to count, and the unique (org, external id) index alone makes a concurrent
       repeat wait for the first one's commit, then skip its row.
    3. Give each row its due time (`_rows_due`): its item's `due_at`, else its submission plus the
       promise the org holds its workflow to (`orgs.selectors.turnaround_targets`), else none.
       Stage the rows (`_stage`: a few inline, many COPYed into a temporary table); one statement
       inserts those whose external id is new to the org (its unique index decides, as it writes)
       and their birth events, and returns their ids.
    4. The charts whose external id existed already are read and returned as they are
       (idempotency: a repeat keeps its first due time too); a repeat that names another workflow
       is a conflict.
    5. Admission: the org's waiting charts plus the new ones must stay within its queue limit.
       A refusal in 4 or 5 raises, and the transaction takes the insert back: nothing is written.
    6. After commit, ask for a replan. When tracing, each new chart keeps the request's trace context
       for its start (`tracing.remember_charts`).
    """
    actor.org_required(org.pk)
    if len(items) > MAX_BULK_ITEMS:
        raise InvalidInput(f"at most {MAX_BULK_ITEMS} charts per request, got {len(items)}", field="items")
    now = timezone.now()
    errors, only_refused, rows, workflows = _items_check(items, staff=actor.staff, now=now)
    if errors:
        conflicts, new = _repeats_with_another_workflow(org, rows)
        for index in conflicts:
            errors[index] = {"external_id": ["already submitted with another workflow"]}
        # Every item not known to be a repeat may be new once fixed: they count against the limit.
        overflow = _queue_overflow(org, incoming=len(items) - (len(rows) - new))
        if only_refused and not conflicts and overflow is None:
            raise BulkForbidden(errors)
        raise BulkInvalid(errors, org=overflow)
    if not items:
        return []

    with transaction.atomic():
        locked = instances_where(Org, 't."id" = %s', [org.pk], lock="FOR KEY SHARE")
        if not locked:
            raise NotFound("org not found", field="org")
        (org,) = locked
        if org.queue_limit is not None or len(rows) > 1:
            _admission_turn(org)
        workflow_of = {workflow.pk: workflow for workflow in workflows.values()}
        rows = _rows_due(org, rows, now=now)
        created = _insert_staged(org, rows, _stage(rows), actor=actor, workflow_of=workflow_of, now=now)
        existing: dict[str, Chart] = {}
        if len(created) < len(rows):
            new_ids = {chart.external_id for chart in created}
            repeats = [row.external_id for row in rows if row.external_id not in new_ids]
            existing = {c.external_id: c for c in Chart.objects.raw(_EXISTING_SQL, [org.pk, repeats])}
        for index, item in enumerate(items):
            prior = existing.get(item.external_id)
            if prior is not None and prior.workflow_id != workflows[item.workflow].pk:
                errors[index] = {"external_id": ["already submitted with another workflow"]}
        if errors:
            if len(items) == 1:
                raise Conflict(errors[0]["external_id"][0], field="external_id")
            raise BulkInvalid(errors)
        _admit(org, len(created))
        if created:
            changed(kind="charts", org_id=org.pk, submitted=len(created))
            tracing.remember_charts(org_id=org.pk, chart_ids=[c.pk for c in created])
    by_external_id = {**existing, **{c.external_id: c for c in created}}
    return [(by_external_id[i.external_id], i.external_id not in existing) for i in items]


def _repeats_with_another_workflow(org: Org, rows: Sequence[StagedRow]) -> tuple[list[int], int]:
    """The good items (`rows`) of a refused bulk that repeat a chart of the org under another workflow,
    so that the refusal lists them with the rest (when nothing else is wrong, step 4 finds them as the
    rows are written), and how many of the good items are new to the org."""
    ids = [row.external_id for row in rows]
    if not ids:
        return [], 0
    prior = dict(Chart.objects.filter(org_id=org.pk, external_id__in=ids).values_list("external_id", "workflow_id"))
    conflicts = [row.item for row in rows if prior.get(row.external_id, row.workflow_id) != row.workflow_id]
    return conflicts, sum(1 for row in rows if row.external_id not in prior)


def _queue_overflow(org: Org, *, incoming: int) -> list[str] | None:
    """Why a refused request would also be refused admission once its items are fixed: its `incoming`
    new charts on top of the org's waiting ones pass its queue limit. Read without the admission turn
    (nothing is written here), so it says how things stand now; `_admit` decides when it is sent again."""
    if org.queue_limit is None or incoming == 0:
        return None
    waiting = Chart.objects.filter(org_id=org.pk, state__in=WAITING_STATES).count()
    if waiting + incoming <= org.queue_limit:
        return None
    return [
        f"even with every item fixed, its {incoming} new chart(s) would not be admitted: org {org.slug} has"
        f" {waiting} waiting charts and its queue limit is {org.queue_limit}"
    ]


class StagedRow(NamedTuple):
    """A validated bulk item as it is staged (`payload`: JSON text), and its payload."""

    item: int
    workflow_id: int
    external_id: str
    payload: str
    high_priority: bool
    priority: int
    due_at: datetime | None
    payload_value: dict[str, Any]


def _rows_due(org: Org, rows: Sequence[StagedRow], *, now: datetime) -> list[StagedRow]:
    """The rows with their due times: the item's own, else `now` (their submission) plus the promise
    the org holds the workflow to, else none. One query for the promises, whatever the rows."""
    undated = {row.workflow_id for row in rows if row.due_at is None}
    if not undated:
        return list(rows)
    targets = turnaround_targets(org=org, workflow_ids=undated)
    due = {
        workflow_id: now + timedelta(seconds=target.turnaround)
        for workflow_id, target in targets.items()
        if target is not None
    }
    if not due:
        return list(rows)
    return [row if row.due_at is not None else row._replace(due_at=due.get(row.workflow_id)) for row in rows]


# The staged rows' columns and their types, as `_stage` gives them to the statements below.
_STAGE_COLUMNS = (
    ("item", "integer"),
    ("workflow_id", "bigint"),
    ("external_id", "text"),
    ("payload", "jsonb"),
    ("high_priority", "boolean"),
    ("priority", "integer"),
    ("due_at", "timestamptz"),
)
# A staged row's values in the order of `_STAGE_COLUMNS`, by name.
_staged_values = attrgetter(*(name for name, _ in _STAGE_COLUMNS))
# A bulk of more rows than this is COPYed into a temporary table (for the length of the transaction);
# up to this many are written into the statements as a VALUES list. Creating and dropping a temporary
# table writes PostgreSQL's catalog: half the statements and most of the database time of a single
# submit (bench/bench_api.py), while a VALUES list of thousands of rows is slower to build than COPY.
INLINE_ROWS = 100
_STAGE_TABLE = "fairsched_submitted"
# The charts of the repeated ids (only read when some item was not new). The ids are one array
# constant, which PostgreSQL hashes when it filters a scan with it, or probes the unique
# (org, external id) index with, as its statistics say; never a search of the array per row.
_EXISTING_SQL = (
    f"SELECT chart.* FROM {Chart._meta.db_table} chart"  # noqa: S608
    " WHERE chart.org_id = %s AND chart.external_id = ANY(%s)"
)
# Columns a bulk names row by row; every other column of a new chart gets its field's default.
_UNIQUE_EXTERNAL_ID = "chart_org_external_id_unique"
_ROW_FIELDS = ("workflow_id", "external_id", "payload", "high_priority", "priority", "due_at")


class Staged(NamedTuple):
    """Where the statements read the staged rows: `sql`, a FROM item named `staged`, and its params."""

    sql: str
    params: list[Any]


def _stage(rows: Sequence[StagedRow]) -> Staged:
    """Stage the bulk's rows: up to INLINE_ROWS as a VALUES list, more COPYed into the temporary
    table (dropped at commit)."""
    names = ", ".join(name for name, _ in _STAGE_COLUMNS)
    if len(rows) <= INLINE_ROWS:
        row_sql = "(" + ", ".join(f"%s::{kind}" for _, kind in _STAGE_COLUMNS) + ")"
        return Staged(
            f"(VALUES {', '.join([row_sql] * len(rows))}) AS staged ({names})",
            [value for row in rows for value in _staged_values(row)],
        )
    with connection.cursor() as cursor:
        # (Dropped first: a caller's transaction may hold an earlier bulk's table.)
        cursor.execute(f"DROP TABLE IF EXISTS pg_temp.{_STAGE_TABLE}")
        typed = ", ".join(f"{name} {kind}" for name, kind in _STAGE_COLUMNS)
        cursor.execute(f"CREATE TEMP TABLE {_STAGE_TABLE} ({typed}) ON COMMIT DROP")
        with cursor.connection.cursor().copy(f"COPY {_STAGE_TABLE} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(_staged_values(row))
    return Staged(f"{_STAGE_TABLE} staged", [])


def _insert_staged(
    org: Org,
    rows: Sequence[StagedRow],
    staged: Staged,
    *,
    actor: Actor,
    workflow_of: Mapping[int, Workflow],
    now: datetime,
) -> list[Chart]:
    """Insert the staged charts whose external id the org has not used yet (its unique index finds
    the others as the rows are written: no lookup before), in item order, with their birth events
    (the '' -> queued event), in one statement; return the charts inserted.

    Every column the rows do not name takes its field's default as Django would give it (auto_now
    fields: now), so a field added later needs nothing here. Only (id, external id) come back: the
    charts are built from the values just written, not read and converted again. `now` is their
    submission (their due times were reckoned from it).
    """
    table = Chart._meta.db_table
    fields = Chart._meta.concrete_fields
    columns: list[str] = []
    values: list[str] = []
    params: list[Any] = []
    fixed: dict[str, object] = {}
    for field in fields:
        if field.primary_key or field.attname in _ROW_FIELDS:
            if not field.primary_key:
                columns.append(field.column)
                values.append(f"staged.{field.attname}")
            continue
        if field.attname == "org_id":
            value: object = org.pk
        elif field.attname == "state":
            value = ChartState.QUEUED
        elif getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False) or field.name == "created_at":
            value = now
        else:
            value = field.get_default()
        fixed[field.attname] = value
        columns.append(field.column)
        values.append("%s")
        params.append(field.get_db_prep_save(value, connection))
    event_table = ChartEvent._meta.db_table
    sql = (
        f"WITH inserted AS (INSERT INTO {table} ({', '.join(columns)})"  # noqa: S608
        f" SELECT {', '.join(values)} FROM {staged.sql} ORDER BY staged.item"
        f" ON CONFLICT ON CONSTRAINT {_UNIQUE_EXTERNAL_ID} DO NOTHING RETURNING id, external_id),"
        f" events AS (INSERT INTO {event_table} (chart_id, from_state, to_state, actor, reason, at)"
        " SELECT id, '', %s, %s, 'submitted', %s FROM inserted)"
        " SELECT id, external_id FROM inserted"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *staged.params, ChartState.QUEUED, actor.name, now])
        ids = dict((external_id, pk) for pk, external_id in cursor.fetchall())
    alias = connection.alias
    return [
        _written_chart(fixed, row, ids[row.external_id], org, workflow_of[row.workflow_id], alias)
        for row in rows
        if row.external_id in ids
    ]


def _written_chart(
    fixed: Mapping[str, object], row: StagedRow, pk: int, org: Org, workflow: Workflow, alias: str
) -> Chart:
    """A chart just inserted, as `Chart.objects` would load it, from the values written: every field,
    its org and workflow (no query to reach them), and its plan's fields (none yet for a new chart).

    Built as `Model.from_db` leaves an instance (the field values by attribute name, and a ModelState
    of its database, not adding), without `Model.__init__`, which sets the 22 fields one by one
    through their descriptors: a third of a 10,000-chart bulk's CPU (bench/bench_api.py).
    """
    chart = Chart.__new__(Chart)
    state = ModelState()
    state.db, state.adding = alias, False
    state.fields_cache = {"org": org, "workflow": workflow}
    chart.__dict__.update(fixed)
    chart.__dict__.update(_NO_PLAN)
    chart.__dict__.update(
        id=pk,
        workflow_id=row.workflow_id,
        external_id=row.external_id,
        payload=row.payload_value,
        high_priority=row.high_priority,
        priority=row.priority,
        due_at=row.due_at,
        _state=state,
    )
    return chart


_NO_PLAN = dict.fromkeys(PLAN_FIELDS)


def _item_check(
    item: ChartRequest, workflows: Mapping[str, Workflow], *, now: datetime
) -> tuple[dict[str, list[str]], dict[str, Any], str]:
    """Check every field of one item (those its `problems` name already are not checked again);
    return the problems by field, and the payload, as a value and as JSON text."""
    problems = {name: list(texts) for name, texts in item.problems.items()}
    if "detail" in problems:
        return problems, {}, "{}"

    def check(name: str, problem: str | None) -> None:
        if problem is not None and name not in problems:
            problems[name] = [problem]

    problem = strict.id_problem(item.external_id, name="external_id")
    if problem is None and len(item.external_id) > MAX_EXTERNAL_ID:
        problem = f"external_id is longer than {MAX_EXTERNAL_ID} characters"
    check("external_id", problem)
    if not isinstance(item.workflow, str) or item.workflow not in workflows:
        check("workflow", f"unknown workflow {item.workflow!r}")
    value: dict[str, Any] = {}
    payload = "{}"
    if item.payload is not None and not isinstance(item.payload, Mapping):
        check("payload", "payload must be a JSON object")
    elif "payload" not in problems:
        value = dict(item.payload or {})
        try:
            payload = _payload_text(value)
        except InvalidInput as bad:
            check("payload", bad.message)
        if len(payload) > MAX_PAYLOAD_BYTES:
            check("payload", f"payload is larger than {MAX_PAYLOAD_BYTES} bytes")
    if not isinstance(item.high_priority, bool):
        check("high_priority", "high_priority must be true or false")
    if "priority" not in problems:
        try:
            _check_priority(item.priority)
        except InvalidInput as bad:
            check("priority", bad.message)
    check("due_at", due_at_problem(item.due_at, now=now))
    return problems, value, payload


def due_at_problem(due_at: object, *, now: datetime) -> str | None:
    """What is wrong with a chart's own due time (None: nothing, or none given): it must be a moment
    with its time zone, after `now`."""
    if due_at is None:
        return None
    if not isinstance(due_at, datetime) or due_at.tzinfo is None or due_at.utcoffset() is None:
        return "due_at must be a date and time with its time zone (ISO 8601, e.g. 2026-01-31T12:00:00Z)"
    if due_at <= now:
        return "due_at is in the past: a chart must be due after its submission"
    return None


def _payload_text(value: dict[str, Any]) -> str:
    """The payload as JSON text, or the reason it is refused.

    Interfaces that parse with `strict.loads` refused a repeated key, a NUL, a lone surrogate, too deep
    a nesting and NaN already; the admin and the shell did not. The encoded text clears most payloads
    (`strict.encoded_is_clean`); any other, or one the encoder refuses, is walked by
    `strict.find_problem`, so the answer is the walk's, as if every payload were walked first.
    """
    if not value:
        return "{}"
    try:
        payload: str | None = _encode_payload(value)
    except (TypeError, ValueError, RecursionError):
        payload = None
    if payload is not None and strict.encoded_is_clean(payload):
        return payload
    bad = strict.find_problem(value)
    if bad is not None:
        raise InvalidInput(f"payload {bad.message}", field="payload")
    if payload is None:
        raise InvalidInput("payload must hold JSON values only", field="payload")
    return payload


def _encode_payload(value: dict[str, Any]) -> str:
    """`_PAYLOAD_JSON.encode(value)` through one C encoder, which `encode` makes anew on every call (the
    making was most of a small payload's encoding: bench/bench_api.py). The same options, the same
    text. It keeps no list of the containers it is in
    (a list shared by threads would see another's), so a circular value, which only Python callers can
    make, ends in RecursionError instead of ValueError (`_payload_text` refuses both)."""
    if _C_ENCODER is None:
        return _PAYLOAD_JSON.encode(value)
    return "".join(_C_ENCODER(value, 0))


_MAKE_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # None without json's C accelerator
_C_ENCODER = (
    None
    if _MAKE_C_ENCODER is None
    else _MAKE_C_ENCODER(
        None,
        _PAYLOAD_JSON.default,
        json.encoder.encode_basestring_ascii,
        _PAYLOAD_JSON.indent,
        _PAYLOAD_JSON.key_separator,
        _PAYLOAD_JSON.item_separator,
        _PAYLOAD_JSON.sort_keys,
        _PAYLOAD_JSON.skipkeys,
        _PAYLOAD_JSON.allow_nan,
    )
)


def _check_priority(priority: object) -> None:
    PRIORITY.check(priority, field="priority")


def _single_error(bulk: BulkInvalid) -> FieldsInvalid:
    """One item's refusal as a single submission's: its fields at fault (and the queue note), all of them."""
    errors = {**bulk.errors.get(0, {}), **({"org": bulk.org} if bulk.org else {})}
    return FieldsForbidden(errors) if isinstance(bulk, BulkForbidden) else FieldsInvalid(errors)


def _admission_turn(org: Org) -> None:
    """Wait until no other submission of the org that takes turns is in progress; the turn (a
    transaction advisory lock) is held until commit. Steps 3-5 of `chart_submit_bulk` run in it:

    - With a queue limit, the count of waiting charts must include every submission admitted before
      (they committed before this turn began: their charts are in this statement's snapshot).
    - Many charts at once: two bulks with external ids in common, inserting them in different orders,
      would each wait in the unique index for a row the other has written: a deadlock. In turns, a
      bulk waits only for single submissions, which wait for nothing once their one row is written.

    Taken after the org row's FOR KEY SHARE lock, always in that order. The key is the pair
    (ADMISSION_LOCK, org id folded into 31 bits, as the two-key form takes integers): two orgs whose
    ids fold alike only take turns with each other, never wrongly at once."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s::integer, %s::integer)", [ADMISSION_LOCK, org.pk & 0x7FFFFFFF])


def _admit(org: Org, incoming: int) -> None:
    """Refuse the submission if it would take the org past its queue limit (in the org's admission
    turn). The `incoming` new charts are inserted already, in this transaction: the count includes them."""
    if org.queue_limit is None or incoming == 0:
        return
    waiting = Chart.objects.filter(org=org, state__in=WAITING_STATES).count() - incoming
    if waiting + incoming > org.queue_limit:
        full = f"org {org.slug} has {waiting} waiting charts; its queue limit is {org.queue_limit}"
        if org.is_held:
            # Nothing of a held org starts until an operator releases it: no time to retry after.
            raise QueueFull(
                f"{full}, and it is held: its queue moves only once released",
                retry_after=None,
                held=True,
                waiting=waiting,
                limit=org.queue_limit,
            )
        raise QueueFull(full, retry_after=_retry_after(org), waiting=waiting, limit=org.queue_limit)


def _retry_after(org: Org) -> int:
    """Seconds until the org's queue is likely to shrink: its next predicted start, within [1 s, 1 h]."""
    next_start = Chart.objects.filter(org=org, state__in=WAITING_STATES, plan__predicted_start__isnull=False).aggregate(
        first=Min("plan__predicted_start")
    )["first"]
    if next_start is None:
        return 60
    return int(min(3600, max(1, (next_start - timezone.now()).total_seconds())))


def chart_pause(*, chart: Chart, actor: Actor, reason: str = "") -> Chart:
    """Pause a waiting chart: it keeps its place among its org's charts but is not dispatched."""
    actor.org_required(chart.org_id, field="chart")
    chart = transition(chart, ChartState.PAUSED, actor=actor, reason=reason or "paused")
    changed(kind="chart", org_id=chart.org_id, chart=chart.pk)
    return chart


def chart_resume(*, chart: Chart, actor: Actor, reason: str = "") -> Chart:
    """Resume a paused chart; a retry keeps its backoff through `available_at`.

    Only from `paused`: the table also lets a claimed (`dispatching`) chart go back to `queued`, but
    that is the reconciler's repair, never a user's resume.
    """
    actor.org_required(chart.org_id, field="chart")
    with transaction.atomic():
        if not transition_if(chart.pk, [ChartState.PAUSED], ChartState.QUEUED, actor=actor, reason=reason or "resumed"):
            chart.refresh_from_db(fields=["state"])
            raise Conflict(f"chart {chart.pk} is {chart.state}; only paused charts can be resumed", field="state")
        chart.state = ChartState.QUEUED
        changed(kind="chart", org_id=chart.org_id, chart=chart.pk)
    return chart


def chart_prioritize(
    *, chart: Chart, high_priority: bool | None = None, priority: int | None = None, actor: Actor, reason: str = ""
) -> Chart:
    """Set the high-priority flag and/or the tenant priority of a chart that has not started; the
    history says what changed, and why when given a `reason`. A tenant sets a priority within
    TENANT_PRIORITY of its own org's charts, never the high-priority tier (403 naming the field), as
    `charts.levers.prioritized` rules."""
    actor.org_required(chart.org_id, field="chart")
    fields = prioritized(high_priority=high_priority, priority=priority, staff=actor.staff)
    with transaction.atomic():
        locked = Chart.objects.select_for_update(of=("self",)).get(pk=chart.pk)
        if locked.state not in WAITING_STATES:
            raise Conflict(f"chart {chart.pk} is {locked.state}; only waiting charts can be reprioritized")
        Chart.objects.filter(pk=chart.pk).update(**fields, updated_at=timezone.now())
        for name, value in fields.items():
            setattr(chart, name, value)
        # Not a transition: the event keeps the state and says what changed, so the history is whole.
        ChartEvent.objects.create(
            chart=chart,
            from_state=locked.state,
            to_state=locked.state,
            actor=actor.name,
            reason="; ".join(
                [", ".join(f"{name} set to {value}" for name, value in fields.items()), *([reason] if reason else [])]
            )[:1000],
        )
        changed(kind="chart", org_id=chart.org_id, chart=chart.pk)
    return chart


def chart_move_to_top(*, chart: Chart, actor: Actor, reason: str = "") -> Chart:
    """Put a chart first among its org's waiting charts by raising its priority above theirs
    (including the largest waiting bonus aging could give them), up to the top of PRIORITY (for a
    tenant, of TENANT_PRIORITY)."""
    actor.org_required(chart.org_id, field="chart")
    highest = PRIORITY.maximum if actor.staff else TENANT_PRIORITY.maximum
    with transaction.atomic():
        Org.objects.select_for_update().get(pk=chart.org_id)
        top = (
            Chart.objects.filter(org_id=chart.org_id, state__in=WAITING_STATES)
            .exclude(pk=chart.pk)
            .aggregate(top=Max("priority"))["top"]
        )
        bonus = SchedulerConfig.load().aging_cap
        priority = min(highest, (top if top is not None else 0) + bonus + 1)
        return chart_prioritize(chart=chart, priority=max(priority, chart.priority), actor=actor, reason=reason)


def chart_cancel(*, chart: Chart, actor: Actor, reason: str = "") -> Chart:
    """Cancel a chart that has not finished. Steps:

    1. Lock the chart and move it to `cancelled` (its budget units are free from here on).
    2. If its workflow may run (the chart was dispatching or running), note the cancel request:
       the reconcile pass asks again, terminates the workflow if it has not closed within
       FAIRSCHED_CANCEL_GRACE seconds, and confirms that it closed (`chart_workflow_closed`).
    3. After commit, have a worker ask Temporal to cancel the workflow (`CANCEL_WORKFLOW_TASK`); if
       that fails, the reconcile pass keeps trying.
    """
    actor.org_required(chart.org_id, field="chart")
    with transaction.atomic():
        previous = (
            Chart.objects.select_for_update(of=("self",)).filter(pk=chart.pk).values_list("state", flat=True).first()
        )
        won = transition_if(
            chart.pk,
            ACTIVE_STATES,
            ChartState.CANCELLED,
            actor=actor,
            reason=reason or "cancelled",
            finished_at=timezone.now(),
        )
        if not won:
            chart.refresh_from_db()
            raise Conflict(f"chart {chart.pk} is {chart.state} and cannot be cancelled", field="state")
        if previous in IN_FLIGHT_STATES:
            Chart.objects.filter(pk=chart.pk).exclude(temporal_workflow_id="").update(
                cancel_requested_at=timezone.now()
            )
        chart.refresh_from_db()
        if chart.cancel_requested_at is not None:
            workflow_id = chart.temporal_workflow_id
            transaction.on_commit(lambda: _cancel_workflow(workflow_id), robust=True)
        changed(kind="chart", org_id=chart.org_id, chart=chart.pk)
    return chart


def chart_workflow_closed(*, chart: Chart, how: str, actor: Actor) -> bool:
    """Settle a cancelled chart's cancel request: Temporal says its workflow has closed (`how`).

    Returns whether this call settled it (a concurrent reconcile may have done so first). The
    history gets a note, cancelled to cancelled, saying how the workflow ended. The reconciler's, not
    a tenant's.
    """
    actor.staff_required(field="chart")
    with transaction.atomic():
        settled = Chart.objects.filter(
            pk=chart.pk, state=ChartState.CANCELLED, cancel_requested_at__isnull=False
        ).update(cancel_requested_at=None)
        if settled:
            ChartEvent.objects.create(
                chart_id=chart.pk,
                from_state=ChartState.CANCELLED,
                to_state=ChartState.CANCELLED,
                actor=actor.name,
                reason=f"workflow closed in Temporal: {how}"[:1000],
            )
    return bool(settled)


def _cancel_workflow(workflow_id: str) -> None:
    """Have a Celery worker ask Temporal to cancel the workflow. Talking to Temporal is scheduling's job,
    above this app, so the task is sent by name (`CANCEL_WORKFLOW_TASK`)."""
    current_app.send_task(CANCEL_WORKFLOW_TASK, args=[workflow_id])


def duration_stats_forget(*, stats: Sequence[DurationStat], actor: Actor) -> int:
    """Forget what was learned of the run durations of these (org, workflow) pairs, as when a new
    version of a workflow takes another time: until new runs finish, their charts' ETAs take the
    workflow's runs by other orgs, its initial duration, the org's runs or FAIRSCHED_DEFAULT_DURATION
    (`scheduling.snapshot.Durations.of`). Each is logged in its org's history; the plan is redone.
    Returns how many were forgotten (a pair forgotten meanwhile is skipped)."""
    actor.staff_required(field="stats")
    with transaction.atomic():
        current = list(
            DurationStat.objects.select_for_update(of=("self",))
            .select_related("org", "workflow")
            .filter(pk__in=[stat.pk for stat in stats])
            .order_by("pk")
        )
        for stat in current:
            learned = f"{stat.workflow}: {stat.mean or 0.0:.1f} s over {stat.count} runs"
            org_change_log(stat.org, actor=actor, field="learned durations", old=learned, new=None, reason="")
        DurationStat.objects.filter(pk__in=[stat.pk for stat in current]).delete()
        for org_id in sorted({stat.org_id for stat in current}):
            changed(kind="org", org_id=org_id)
    return len(current)
