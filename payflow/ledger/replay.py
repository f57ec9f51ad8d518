"""The ledger's DLQ replayer: a dead-lettered payment event goes back to the ledger queue."""

from __future__ import annotations

from payflow.broker.topology import TOPIC_LEDGER_EVENT
from payflow.db import Connection
from payflow.ledger.posting import posting_key
from payflow.ledger.states import SQL, EventStatus, reopen_failed
from payflow.outbox.writer import enqueue


async def replay_event(conn: Connection, event_id: str) -> str:
    """Re-drive a dead-lettered payment event (DLQ source `payment_event`) inside the
    caller's transaction; returns the resolution text. An event already posted (its
    posting claim exists) or confirmed is left alone; a failed one is reopened first.
    Posting stays exactly-once: the replayed message carries the same event id."""
    event = await conn.fetchrow(SQL["event_for_replay"], event_id)
    if event is None:
        return "skipped: event no longer exists"
    claim = await conn.fetchval(SQL["has_posting_claim"], posting_key(event_id))
    if claim is not None:
        return f"already applied: posting outcome {claim}; nothing replayed"
    status = EventStatus(event["status"])
    if status is EventStatus.FAILED and not await reopen_failed(conn, event_id):
        return "skipped: event could not be reopened"
    if status is EventStatus.CONFIRMED:
        return "already applied: event confirmed; nothing replayed"
    await enqueue(conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, event["trace_id"])
    return f"requeued: event {status} -> pending, ledger.event re-sent"
