"""The ledger's hook on the outbox relay: a `ledger.event` row's payment event moves
pending -> enqueued in the relay's transaction, before the row is handed to the broker,
and back when it was not handed over after all (wired in `payflow.roles`)."""

from __future__ import annotations

import structlog

from payflow.broker.topology import TOPIC_LEDGER_EVENT
from payflow.db import Connection
from payflow.ledger.states import EventStatus, existing_events, transition_many
from payflow.outbox.relay import PublishHook

log = structlog.get_logger("payflow.outbox")


async def _mark_events(
    conn: Connection, event_ids: set[str], target: EventStatus, expected: EventStatus
) -> None:
    """Best-effort status move for announced events, in one statement: a moved-on event
    is a no-op, and an unknown one is published anyway so that the worker dead-letters
    it (a poison row must never block the relay). Unknown ids cost one extra read,
    only when some event did not move."""
    if not event_ids:
        return
    moved = await transition_many(conn, event_ids, target, expected=expected)
    if len(moved) == len(event_ids):
        return
    missing = event_ids - moved
    for event_id in sorted(missing - await existing_events(conn, missing)):
        log.warning("payflow.outbox.unknown_event", event_id=event_id)


async def events_publishing(conn: Connection, event_ids: set[str]) -> None:
    """Announced events about to be handed to the broker: pending -> enqueued."""
    await _mark_events(conn, event_ids, EventStatus.ENQUEUED, EventStatus.PENDING)


async def events_not_published(conn: Connection, event_ids: set[str]) -> None:
    """Announced events the relay could not hand over after all: enqueued -> pending."""
    await _mark_events(conn, event_ids, EventStatus.PENDING, EventStatus.ENQUEUED)


ON_PUBLISHED = PublishHook(
    topic=TOPIC_LEDGER_EVENT,
    subject_key="event_id",
    publishing=events_publishing,
    not_published=events_not_published,
)
