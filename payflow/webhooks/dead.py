"""A payment's webhook that is dead-lettered: marking it, and its manual DLQ replay."""

from __future__ import annotations

from uuid import UUID

from payflow.broker.topology import TOPIC_WEBHOOK_DELIVER
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.webhooks")


async def mark_webhook_dead(conn: Connection, payment_id: UUID) -> bool:
    """Mark the payment's webhook dead-lettered, inside the caller's transaction (the
    one that writes its DLQ row); True only for the transition: False when it was
    delivered meanwhile or is dead already (nothing marked, no DLQ row to write).
    """
    return await conn.fetchval(SQL["mark_webhook_dead"], payment_id) is not None


async def clear_webhook_dead(conn: Connection, payment_id: UUID) -> None:
    """Hand a dead-lettered webhook back to the pipeline (manual DLQ replay): no chain
    owns it any more (the replay's message takes it), the sweep watches it again, its
    wait restarting now. Inside the caller's transaction."""
    await conn.execute(SQL["clear_webhook_dead"], payment_id)


async def replay_webhook(conn: Connection, subject: str) -> str:
    """Re-drive a dead-lettered webhook (DLQ source `webhook`) inside the caller's
    transaction; returns the resolution text. A delivered webhook is left alone; else
    `webhook.deliver` is sent again with the same webhook-id."""
    try:
        payment_id = UUID(subject)
    except ValueError:
        return "skipped: subject is not a payment id"
    payment = await conn.fetchrow(SQL["payment_for_webhook_replay"], payment_id)
    if payment is None:
        return "skipped: payment no longer exists"
    if payment["webhook_delivered_at"] is not None:
        return "already delivered: nothing replayed"
    if payment["webhook_url"] is None:
        return "skipped: payment has no webhook URL"
    await clear_webhook_dead(conn, payment_id)
    payload = {"version": 1, "payment_id": str(payment_id)}
    await enqueue(conn, TOPIC_WEBHOOK_DELIVER, payload, payment["trace_id"])
    return "requeued: webhook.deliver re-sent with the same webhook-id"
