"""Payment creation and reads. Callers own the transaction; nothing here commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg

from payflow.db.queries import load_queries
from payflow.errors import NotFound
from payflow.outbox.writer import enqueue
from payflow.payments.idempotency import StoredResponse, check_stored, lock_key

SQL = load_queries("payflow.payments")
CREATE_SCOPE = "payments.create"
PAYMENT_CREATED_TOPIC = "payment.created"


@dataclass(frozen=True, slots=True)
class NewPayment:
    """A validated payment request."""

    amount: Decimal
    currency: str
    description: str | None
    metadata: dict[str, Any]
    webhook_url: str | None


async def create_payment(
    conn: asyncpg.Connection,
    merchant_id: UUID,
    payment: NewPayment,
    *,
    idempotency_key: str,
    request_hash: str,
    trace_id: str,
) -> StoredResponse:
    """Create a pending payment under an Idempotency-Key, or answer from the stored record.

    Invariant: the payment, its idempotency record and its one `payment.created` outbox
    row commit together in the caller's transaction, or none does; a replay returns
    exactly the stored body. Raises the 409 problems of `idempotency.check_stored`.
    """
    row = await conn.fetchrow(
        SQL["create_payment"],
        merchant_id,
        payment.amount,
        payment.currency,
        payment.description,
        payment.metadata,
        idempotency_key,
        payment.webhook_url,
        trace_id,
        request_hash,
        lock_key(merchant_id, CREATE_SCOPE, idempotency_key),
    )
    assert row is not None  # the statement always yields one row
    stored = check_stored(row, request_hash)
    if stored is not None:
        return stored
    await enqueue(
        conn, PAYMENT_CREATED_TOPIC, {"version": 1, "payment_id": str(row["id"])}, trace_id
    )
    return StoredResponse(202, row["response"])


async def get_payment(
    conn: asyncpg.Connection, merchant_id: UUID, payment_id: UUID
) -> asyncpg.Record:
    """One payment of `merchant_id`; `NotFound` for unknown ids and other tenants alike."""
    row = await conn.fetchrow(SQL["get_payment"], payment_id, merchant_id)
    if row is None:
        raise NotFound(f"payment {payment_id} does not exist")
    return row


async def list_payments(
    conn: asyncpg.Connection,
    merchant_id: UUID,
    *,
    status: str | None,
    created_from: datetime | None,
    created_to: datetime | None,
    after: tuple[datetime, UUID] | None,
    limit: int,
) -> list[asyncpg.Record]:
    """A page of the merchant's payments, newest first, strictly after the cursor."""
    cursor_at, cursor_id = after if after is not None else (None, None)
    rows: list[asyncpg.Record] = await conn.fetch(
        SQL["list_payments"],
        merchant_id,
        status,
        created_from,
        created_to,
        cursor_at,
        cursor_id,
        limit,
    )
    return rows
