"""A dead-lettered endpoint delivery: marking it (with its one DLQ row), its manual DLQ
replay (`payflow dlq replay`, the console's Replay) and the Redis drain's redo."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from payflow.broker.topology import TOPIC_ENDPOINT_DELIVER
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.dlq.drain import DeadLetterer
from payflow.dlq.fallback import FallbackEntry
from payflow.dlq.records import record_dead_letter
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.webhooks.endpoints")

DLQ_SOURCE = "endpoint_delivery"


def delivery_payload(delivery_id: int) -> dict[str, Any]:
    """The `endpoint.deliver` message of one delivery."""
    return {"version": 1, "delivery_id": delivery_id}


async def requeue_delivery(conn: Connection, delivery_id: int) -> bool:
    """Inside the caller's transaction: make the delivery pending and due now, and add its
    `endpoint.deliver` outbox row (sent after the commit, with the same `webhook-id`).
    False when the delivery does not exist."""
    row = await conn.fetchrow(SQL["requeue_delivery"], delivery_id)
    if row is None:
        return False
    await enqueue(conn, TOPIC_ENDPOINT_DELIVER, delivery_payload(delivery_id))
    return True


async def dead_letter_delivery(
    conn: Connection,
    payload: dict[str, Any],
    error: str,
    attempt: int,
    *,
    fallback: Mapping[str, str] | None = None,
) -> int | None:
    """Inside the caller's transaction: mark the delivery dead and write its one DLQ row
    (source `endpoint_delivery`, subject the delivery id); returns the row's id, or None
    when nothing was written (delivered meanwhile, dead already, or another send holds a
    live lease: that send decides). A payload naming no delivery still gets its row."""
    value = payload.get("delivery_id")
    attempts = max(attempt, 1)
    if isinstance(value, int) and not isinstance(value, bool):
        marked = await conn.fetchrow(SQL["mark_delivery_dead"], value)
        if marked is None:
            return None
        attempts = max(int(marked["attempts"]), attempts)
    return await record_dead_letter(
        conn,
        source=DLQ_SOURCE,
        subject_id=str(value),
        payload=payload,
        error=error,
        attempt=attempts,
        fallback=fallback,
    )


async def replay_delivery(conn: Connection, subject: str) -> str:
    """Re-drive a dead-lettered delivery (DLQ source `endpoint_delivery`) inside the
    caller's transaction; returns the resolution text."""
    try:
        delivery_id = int(subject)
    except ValueError:
        return "skipped: subject is not a delivery id"
    row = await conn.fetchrow(SQL["delivery_for_replay"], delivery_id)
    if row is None:
        return "skipped: delivery no longer exists"
    if row["state"] == "delivered":
        return "already delivered: nothing replayed"
    await requeue_delivery(conn, delivery_id)
    return "requeued: endpoint.deliver re-sent with the same webhook-id"


async def _redo(conn: Connection, entry: FallbackEntry, fallback: Mapping[str, str]) -> int | None:
    """The Redis DLQ drain's redo of `EndpointSender.on_dead`."""
    return await dead_letter_delivery(
        conn, entry.payload, entry.error, entry.attempt, fallback=fallback
    )


# What the Redis DLQ drain runs for an `endpoint_delivery` entry.
ENDPOINT_DEAD_LETTERER = DeadLetterer("delivery_id", _redo)
