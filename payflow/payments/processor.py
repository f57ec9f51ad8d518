"""The payment worker: pending -> gateway -> succeeded|failed, credit, webhook job.

The finalising transaction is the only one that matters: it moves the payment by
compare-and-set, and in the same commit writes the merchant's `payment_credit` event
(posted exactly once by the ledger worker, event id ``payment:<uuid>``) and the
`webhook.deliver` outbox row. So whatever crashes where, either none of the three
exist (the redelivered message redoes the work) or all of them do (a redelivery sees
a terminal payment and stops; the webhook job is already in the outbox).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from uuid import UUID

import asyncpg
import structlog

from payflow.broker.messages import Envelope
from payflow.broker.topology import TOPIC_LEDGER_EVENT, TOPIC_WEBHOOK_DELIVER
from payflow.config import Settings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import BadInput, NotFound, PayflowError
from payflow.ledger.accounts import record_event
from payflow.ledger.records import EventType
from payflow.money import format_amount, parse_amount
from payflow.ops.dlq import record_dead_letter
from payflow.outbox.writer import enqueue
from payflow.payments.gateway import ChargeRequest, Gateway

SQL = load_queries("payflow.payments")
log = structlog.get_logger("payflow.payments")

SUCCEEDED = "succeeded"
FAILED = "failed"


def credit_event_id(payment_id: UUID) -> str:
    """The deterministic ledger event id of a payment's merchant credit."""
    return f"payment:{payment_id}"


def payment_id_of(envelope: Envelope) -> UUID:
    """The payment id a message is about; `BadInput` when missing or malformed."""
    raw = envelope.payload.get("payment_id")
    try:
        return UUID(str(raw))
    except ValueError:
        raise BadInput(f"message has no valid payment_id ({raw!r})") from None


async def load_payment(conn: Connection, payment_id: UUID) -> asyncpg.Record:
    """The payment with its merchant's webhook secret; `NotFound` when absent."""
    row = await conn.fetchrow(SQL["payment_for_processing"], payment_id)
    if row is None:
        raise NotFound(f"payment {payment_id} does not exist")
    return row


async def merchant_account(conn: Connection, merchant_id: UUID, asset: str) -> UUID:
    """The merchant's account for `asset`, opened on first use (race-free)."""
    await conn.execute(SQL["open_merchant_account"], merchant_id, asset)
    account_id: UUID | None = await conn.fetchval(SQL["merchant_account"], merchant_id, asset)
    assert account_id is not None  # inserted or already there, and never deleted
    return account_id


async def finalize(
    conn: Connection, payment: asyncpg.Record, status: str, trace_id: str | None
) -> bool:
    """Move a pending payment to `status` with its credit and webhook job; False if it
    was already final. Runs inside the caller's transaction.

    Invariant: the status, the credit event with its `ledger.event` job (successes) and
    the `webhook.deliver` job (when a URL is set) are written together or not at all:
    one statement normally, plus the account opening on a merchant's first success in
    a currency, all in the caller's transaction.
    """
    if not conn.is_in_transaction():
        raise RuntimeError("finalize must run inside the caller's transaction")
    payment_id: UUID = payment["id"]
    event_id = credit_event_id(payment_id) if status == SUCCEEDED else None
    amount: Decimal = payment["amount"]
    credit_amount = format_amount(amount)  # exact: normalize() rounded at 28 digits
    credit_job = {"version": 1, "event_id": event_id}
    webhook_job = {"version": 1, "payment_id": str(payment_id)} if payment["webhook_url"] else None
    # Validated like any recorded event; a decline (or dead-lettering) never parses it.
    credit_value = parse_amount(credit_amount, payment["scale"]) if event_id else None
    row = await conn.fetchrow(
        SQL["finalize_payment"],
        payment_id,
        status,
        payment["merchant_id"],
        payment["currency"],
        event_id,
        credit_value,
        EventType.PAYMENT_CREDIT.value,
        trace_id,
        TOPIC_LEDGER_EVENT,
        credit_job,
        TOPIC_WEBHOOK_DELIVER,
        webhook_job,
    )
    assert row is not None
    if not row["finalized"]:
        return False
    if event_id is not None and not row["credited"]:
        # The merchant's first success in this currency: open the account (race-free),
        # then write the credit and its job; still the same transaction.
        account_id = await merchant_account(conn, payment["merchant_id"], payment["currency"])
        await record_event(
            conn,
            event_id=event_id,
            account_id=account_id,
            amount=credit_amount,
            event_type=EventType.PAYMENT_CREDIT,
            scale=payment["scale"],
            trace_id=trace_id,
        )
        await enqueue(conn, TOPIC_LEDGER_EVENT, credit_job, trace_id)
    return True


class PaymentProcessor:
    """Handles `payment.created` messages."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings, gateway: Gateway) -> None:
        self._pool = pool
        self._settings = settings
        self._gateway = gateway

    async def handle(self, envelope: Envelope) -> None:
        """Process one payment; a duplicate delivery of a final payment does nothing.

        Invariant: the payment's status, its credit event and its webhook job commit
        together, once.
        """
        payment_id = payment_id_of(envelope)
        structlog.contextvars.bind_contextvars(payment_id=str(payment_id))
        async with self._pool.acquire() as conn:
            payment = await load_payment(conn, payment_id)
        if payment["status"] != "pending":
            log.info("payflow.payments.duplicate", status=payment["status"])
            return
        log.debug("payflow.payments.charging")
        result = await self._gateway.charge(
            ChargeRequest(payment_id, payment["amount"], payment["currency"])
        )
        status = SUCCEEDED if result.approved else FAILED
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            changed = await finalize(conn, payment, status, envelope.trace_id or None)
        log.info(
            "payflow.payments.finalized" if changed else "payflow.payments.duplicate",
            status=status,
            reason=result.reason,
        )

    async def on_dead(self, envelope: Envelope, error: PayflowError) -> None:
        """Retries exhausted: mark the payment failed (webhook job included) and record
        the DLQ row, in one transaction."""
        payload: dict[str, Any] = dict(envelope.payload)
        subject = str(payload.get("payment_id"))
        async with self._pool.acquire() as conn, transaction(conn, self._settings):
            try:
                payment = await load_payment(conn, payment_id_of(envelope))
            except (BadInput, NotFound):
                payment = None
            if payment is not None and payment["status"] == "pending":
                await finalize(conn, payment, FAILED, envelope.trace_id or None)
            await record_dead_letter(
                conn,
                source="payment",
                subject_id=subject,
                payload=payload,
                error=f"{type(error).__name__}: {error}",
                attempt=envelope.attempt,
            )
