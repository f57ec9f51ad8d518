"""The payment event state machine: one table of transitions, and the functions that move.

`transition` (one event) and `transition_many` (a set, one statement) are compare-and-set
moves along `TRANSITIONS`; with the operator-only `reopen_failed`, no other code writes
`payment_events.status`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

import asyncpg

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import NotFound

SQL = load_queries("payflow.ledger")


class EventStatus(StrEnum):
    PENDING = "pending"
    ENQUEUED = "enqueued"
    PROCESSING = "processing"
    CONFIRMED = "confirmed"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({EventStatus.CONFIRMED, EventStatus.FAILED})

TRANSITIONS: dict[EventStatus, frozenset[EventStatus]] = {
    EventStatus.PENDING: frozenset({EventStatus.ENQUEUED, EventStatus.FAILED}),
    EventStatus.ENQUEUED: frozenset(
        {EventStatus.PROCESSING, EventStatus.FAILED, EventStatus.PENDING, EventStatus.CONFIRMED}
    ),
    EventStatus.PROCESSING: frozenset({EventStatus.CONFIRMED, EventStatus.FAILED}),
    EventStatus.CONFIRMED: frozenset(),
    EventStatus.FAILED: frozenset(),
}


def sources_of(target: EventStatus) -> list[str]:
    """Every status from which `target` may be reached in one step."""
    return [str(source) for source, targets in TRANSITIONS.items() if target in targets]


def is_valid(source: EventStatus, target: EventStatus) -> bool:
    """True when the table allows `source -> target` in one step."""
    return target in TRANSITIONS[source]


class TransitionKind(StrEnum):
    CHANGED = "changed"
    ALREADY_IN_TARGET = "already_in_target"  # a no-op: someone got there first
    ALREADY_TERMINAL = "already_terminal"  # already processed, to another end
    CONCURRENT_CHANGE = "concurrent_change"  # status moved under us: retryable
    INVALID = "invalid"  # the table does not allow this move from the current status


@dataclass(frozen=True, slots=True)
class TransitionResult:
    kind: TransitionKind
    status: EventStatus
    row: asyncpg.Record | None = None

    @property
    def changed(self) -> bool:
        return self.kind is TransitionKind.CHANGED


async def transition(
    conn: Connection,
    event_id: str,
    target: EventStatus,
    *,
    expected: EventStatus | None = None,
) -> TransitionResult:
    """Move an event to `target` by compare-and-set; runs inside the caller's transaction.

    Invariant: the status changes only along `TRANSITIONS`. When `expected` is given,
    only that source status is accepted. The result tells a no-op (already in target)
    from an already-terminal event from a concurrent change.
    """
    sources = sources_of(target)
    if expected is not None:
        sources = [str(expected)] if str(expected) in sources else []
    row = await conn.fetchrow(SQL["transition_event"], event_id, str(target), sources)
    if row is not None:
        return TransitionResult(TransitionKind.CHANGED, target, row)
    current = await conn.fetchval(SQL["event_status"], event_id)
    if current is None:
        raise NotFound(f"payment event {event_id!r} does not exist")
    status = EventStatus(current)
    if status is target:
        return TransitionResult(TransitionKind.ALREADY_IN_TARGET, status)
    if status.is_terminal:
        return TransitionResult(TransitionKind.ALREADY_TERMINAL, status)
    if expected is not None and status is not expected:
        return TransitionResult(TransitionKind.CONCURRENT_CHANGE, status)
    if not is_valid(status, target):
        return TransitionResult(TransitionKind.INVALID, status)
    # The status allowed the move but changed between our UPDATE and this read.
    return TransitionResult(TransitionKind.CONCURRENT_CHANGE, status)


async def transition_many(
    conn: Connection,
    event_ids: Collection[str],
    target: EventStatus,
    *,
    expected: EventStatus | None = None,
) -> set[str]:
    """Move many events to `target` in ONE compare-and-set statement; returns those moved.

    Invariant: the same as `transition`, row by row: an event moves only along
    `TRANSITIONS` (and only from `expected` when given); an event in any other status,
    or unknown, is left untouched and simply absent from the result. Runs inside the
    caller's transaction; the rows stay locked until it ends.
    """
    if not event_ids:
        return set()
    sources = sources_of(target)
    if expected is not None:
        sources = [str(expected)] if str(expected) in sources else []
    rows = await conn.fetch(SQL["transition_events"], list(event_ids), str(target), sources)
    return {row["event_id"] for row in rows}


async def existing_events(conn: Connection, event_ids: Collection[str]) -> set[str]:
    """The subset of `event_ids` that exist (one statement)."""
    if not event_ids:
        return set()
    rows = await conn.fetch(SQL["existing_events"], list(event_ids))
    return {row["event_id"] for row in rows}


async def reopen_failed(conn: Connection, event_id: str) -> bool:
    """Operator-only: move a failed, never-posted event back to pending; True if moved.

    This is deliberately outside `TRANSITIONS`: no automatic path may leave a terminal
    status. It exists for the audited manual DLQ replay, and it refuses any event that
    has a posting record, so a replay can never apply an event twice.
    """
    return await conn.fetchval(SQL["reopen_failed_event"], event_id) is not None
