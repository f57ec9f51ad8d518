"""Payment creation and reads.

`create_payment` is one statement sent outside a transaction: it commits by itself.
The reads run wherever the caller runs them and write nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg
import orjson

from payflow.broker.topology import TOPIC_PAYMENT_CREATED
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.errors import NotFound
from payflow.idempotency.records import (
    IdempotencyKeyReused,
    StoredResponse,
    check_stored,
    lock_key,
)
from payflow.ledger.limits import LimitExceeded, LimitKind, limits_from_row

SQL = load_queries("payflow.payments")
CREATE_SCOPE = "payments.create"


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
    bounds: StatementBounds,
    notify: bool = True,
) -> StoredResponse:
    """Create a pending payment under an Idempotency-Key, or answer from what is stored.

    ONE autocommitted statement (`conn` must not be inside a transaction): the
    currency's `max_payment`, the key's lock and stored record, and the inserts, bounded
    by `bounds` (`TimeoutError` or 55P03, both retryable; see `StatementBounds`).

    Invariant: the payment, its idempotency record and its one `payment.created` outbox
    row commit together, or none does. A replay writes nothing and is answered whatever
    the currency's limits are now (after `assets set-limit` lowers `max_payment`, the
    retry of a payment already made and credited must not get a 422, which a client
    reads as "not created"); a new payment above `max_payment` writes nothing and
    raises `LimitExceeded` (422 naming `body.amount`); an unconfigured currency raises
    `NotFound`. A replay:
    while the idempotency record exists it returns exactly the stored body; after its
    retention the payment row itself decides (`_replay_payment`). Raises the 409
    problems of `idempotency.check_stored`, and `IdempotencyKeyReused` when the key's
    payment differs from this request.

    `notify` False leaves the relay's NOTIFY out of the commit: the caller then wakes the
    relay itself once this returns (`RelayWaker.poke`, as the API does).
    """
    if conn.is_in_transaction():
        raise RuntimeError("create_payment runs outside a transaction (it commits)")
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
        TOPIC_PAYMENT_CREATED,
        bounds.lock_timeout_ms,
        notify,
        timeout=bounds.timeout_s,
    )
    assert row is not None  # the statement always yields one row
    if row["code"] is None:
        raise NotFound(f"unknown asset {payment.currency!r}")
    stored = check_stored(row, request_hash)
    if stored is not None:
        return stored
    if row["prior_id"] is not None:
        return _replay_payment(row, payment)
    if not row["within"]:  # nothing was written: a new payment above the limit
        limits = limits_from_row(row)
        raise LimitExceeded(limits, LimitKind.PAYMENT, payment.amount, field="body.amount")
    return StoredResponse(202, row["response"])  # the payment.created job came with it


def _canonical(value: Any) -> bytes:
    """Type-exact JSON for comparing metadata (`1`, `1.0` and `true` stay different)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _replay_payment(row: Any, payment: NewPayment) -> StoredResponse:
    """Judge a request against the payment already made under its key (the domain row).

    The same request (amount at the currency's scale, currency, description, metadata,
    webhook URL) gets 202 with the original answer's shape (`payment_id`, `status`,
    `created_at`) and the payment's current status; anything else is
    `IdempotencyKeyReused` (409). Nothing of the request is echoed.
    """
    same = (
        row["prior_amount"] == payment.amount
        and row["prior_currency"] == payment.currency
        and row["prior_description"] == payment.description
        and _canonical(row["prior_metadata"]) == _canonical(payment.metadata)
        and row["prior_webhook_url"] == payment.webhook_url
    )
    if not same:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was already used for a payment with different details"
        )
    return StoredResponse(202, row["prior_response"])


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
