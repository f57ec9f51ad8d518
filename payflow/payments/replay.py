"""The payments' DLQ replayer: a dead-lettered pending payment goes back to its worker."""

from __future__ import annotations

from uuid import UUID

from payflow.broker.topology import TOPIC_PAYMENT_CREATED
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.payments")


async def replay_payment(conn: Connection, subject: str) -> str:
    """Re-drive a dead-lettered payment (DLQ source `payment`) inside the caller's
    transaction; returns the resolution text. A final payment is left alone; a pending
    one gets `payment.created` again (the charge-claim protocol keeps it charged once)."""
    try:
        payment_id = UUID(subject)
    except ValueError:
        return "skipped: subject is not a payment id"
    payment = await conn.fetchrow(SQL["payment_for_replay"], payment_id)
    if payment is None:
        return "skipped: payment no longer exists"
    if payment["status"] != "pending":
        return f"already final: payment {payment['status']}; nothing replayed"
    payload = {"version": 1, "payment_id": str(payment_id)}
    await enqueue(conn, TOPIC_PAYMENT_CREATED, payload, payment["trace_id"])
    return "requeued: payment.created re-sent"
