"""The chart state machine: the allowed transitions are data, and this module is the only writer of
`Chart.state`. Every transition writes a `ChartEvent` in the same transaction.

Two ways to move a chart:
- `transition(chart, ...)` for a chart the caller holds (ideally locked with `select_for_update`);
- `transition_if(chart_id, from_states, ...)`, a compare-and-swap for passes that race (the dispatcher's
  claim, the reconciler's outcome): it counts only if it changed the row, otherwise someone else won.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from charts.models import CLAIMABLE_STATES, IN_FLIGHT_STATES, Chart, ChartEvent, ChartPlan, ChartState
from common.actors import Actor
from common.errors import Conflict

S = ChartState

TRANSITIONS: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.PAUSED, S.DISPATCHING, S.CANCELLED}),
    S.PAUSED: frozenset({S.QUEUED, S.CANCELLED}),
    # A claimed chart starts running; or the reconciler finds it never started (back to queued), or that
    # it already finished before the dispatcher could mark it running.
    S.DISPATCHING: frozenset({S.RUNNING, S.QUEUED, S.SUCCEEDED, S.RETRY_WAIT, S.FAILED, S.CANCELLED}),
    # A run its provider throttled goes back to the queue: no failure, no attempt spent.
    S.RUNNING: frozenset({S.SUCCEEDED, S.QUEUED, S.RETRY_WAIT, S.FAILED, S.CANCELLED}),
    S.RETRY_WAIT: frozenset({S.DISPATCHING, S.PAUSED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


class IllegalTransition(Conflict):
    def __init__(self, chart: Chart | int, from_state: str, to_state: str) -> None:
        chart_label = chart if isinstance(chart, int) else chart.pk
        super().__init__(f"chart {chart_label} cannot go from {from_state} to {to_state}", field="state")
        self.from_state = from_state
        self.to_state = to_state


def can_transition(from_state: str, to_state: str) -> bool:
    return to_state in TRANSITIONS.get(from_state, frozenset())


def transition(chart: Chart, to_state: str, *, actor: Actor, reason: str = "", **fields: Any) -> Chart:
    """Move a chart the caller holds to `to_state`, setting `fields` too, and log it.

    1. Refuse a transition the table does not allow (`IllegalTransition`, HTTP 409).
    2. Update the row, guarded by its current state so that a concurrent change is not overwritten.
    3. Write the event in the same transaction.
    """
    from_state = chart.state
    if not can_transition(from_state, to_state):
        raise IllegalTransition(chart, from_state, to_state)
    with transaction.atomic():
        if not transition_if(chart.pk, [from_state], to_state, actor=actor, reason=reason, **fields):
            chart.refresh_from_db(fields=["state"])
            raise IllegalTransition(chart, chart.state, to_state)
    chart.state = to_state
    for name, value in fields.items():
        setattr(chart, name, value)
    return chart


def transition_if(
    chart_id: int,
    from_states: Iterable[str],
    to_state: str,
    *,
    actor: Actor,
    reason: str = "",
    where: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Compare-and-swap: move the chart to `to_state` only if it is in one of `from_states` (and its
    row also matches `where`, e.g. the attempt the caller read).

    Returns whether this call won. The update and the event share one transaction; the event records
    the state the row really had, read back from the same statement.
    """
    allowed = [state for state in from_states if can_transition(state, to_state)]
    if not allowed:
        raise IllegalTransition(chart_id, "/".join(from_states), to_state)
    now = timezone.now()
    with transaction.atomic():
        previous = (
            Chart.objects.select_for_update(of=("self",))
            .filter(pk=chart_id, state__in=allowed, **(where or {}))
            .values_list("state", flat=True)
            .first()
        )
        if previous is None:
            return False
        Chart.objects.filter(pk=chart_id).update(state=to_state, updated_at=now, **fields)
        _leave_plan(chart_id, to_state)
        ChartEvent.objects.create(
            chart_id=chart_id, from_state=previous, to_state=to_state, actor=actor.name, reason=reason[:1000], at=now
        )
    return True


def _leave_plan(chart_id: int, to_state: str) -> None:
    """A chart that leaves the queue leaves the fair order at once, not at the next replan: an
    in-flight chart keeps its predicted start and ETA, a paused or finished one loses its plan.

    A replan builds its plan in a new table and swaps it in last before its commit: a transition
    waits at most for that swap (a few renames), then writes to the new table; what a replan
    computed before the transition lasts until the next one, and readers go by `state`. (SKIP
    LOCKED: nor does it wait for a row someone else holds.)
    """
    if to_state in CLAIMABLE_STATES:
        return
    table = ChartPlan._meta.db_table
    unlocked = f"SELECT chart_id FROM {table} WHERE chart_id = %s FOR UPDATE SKIP LOCKED"  # noqa: S608
    with connection.cursor() as cursor:
        if to_state in IN_FLIGHT_STATES:
            cursor.execute(f"UPDATE {table} SET position = NULL WHERE chart_id IN ({unlocked})", [chart_id])  # noqa: S608
        else:
            cursor.execute(f"DELETE FROM {table} WHERE chart_id IN ({unlocked})", [chart_id])  # noqa: S608
