"""Outbox writes: every side effect outside PostgreSQL starts as a row written here,
in the same transaction as the state change it announces."""

from __future__ import annotations

from typing import Any

from payflow.db import Connection
from payflow.db.queries import load_queries

SQL = load_queries("payflow.outbox")
NOTIFY_CHANNEL = "payflow_outbox"


async def enqueue(
    conn: Connection, topic: str, payload: dict[str, Any], trace_id: str | None = None
) -> int:
    """Add a message to the outbox inside the caller's transaction; returns its id.

    Invariant: the message exists if and only if the caller's transaction commits,
    and the relay is woken (NOTIFY) only then. Amounts in `payload` must be strings.
    """
    if not conn.is_in_transaction():
        raise RuntimeError("outbox.enqueue must run inside the caller's transaction")
    outbox_id: int = await conn.fetchval(SQL["insert_outbox"], topic, payload, trace_id)
    return outbox_id


async def release_held_job(
    conn: Connection, outbox_id: int, *, timeout_s: float | None = None
) -> None:
    """Make a held-back job due now (its worker will not settle it); autocommit or the
    caller's transaction. A job already published, settled or due is left alone.
    `timeout_s` bounds an autocommitted release as a whole (`TimeoutError`): it is best
    effort, since the relay publishes the job anyway when its hold ends."""
    await conn.execute(SQL["release_held_job"], outbox_id, timeout=timeout_s)
