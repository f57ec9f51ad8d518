"""A payment whose message exhausted its retries: settle what is known, record the DLQ row.

Shared by the worker's `on_dead` and the Redis DLQ drain. Invariant: a payment is marked
failed only when the gateway's answer is known or the gateway was never asked; else it
stays pending with its attempt `needs_review`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import asyncpg
import structlog

from payflow.db import Connection
from payflow.dlq import record_dead_letter
from payflow.dlq.drain import DeadLetterer
from payflow.dlq.fallback import FallbackEntry
from payflow.errors import RetryableError, classify
from payflow.payments.charges import latest_attempt, lock_payment, mark_needs_review, record_answer
from payflow.payments.finalize import FAILED, SUCCEEDED, finalize
from payflow.payments.gateway import ChargeResult
from payflow.payments.records import load_payment

log = structlog.get_logger("payflow.payments")

# What a payment's settle records when the drain (which asks no gateway) finds an open
# charge attempt: the attempt goes to needs_review, as when on_dead finds the gateway down.
PAYMENT_NOTE = "dead-lettered while PostgreSQL was unreachable; the gateway was not asked"


def status_of(result: ChargeResult) -> str:
    """The terminal status a gateway answer gives a payment: succeeded or failed."""
    return SUCCEEDED if result.approved else FAILED


async def settle_dead(
    conn: Connection,
    payment: asyncpg.Record,
    known: ChargeResult | None,
    note: str,
    error: str,
    trace_id: str | None,
) -> None:
    """`on_dead`'s decision for a locked pending payment (see `PaymentProcessor.on_dead`);
    `error` is the dead-lettering error's text."""
    latest = await latest_attempt(conn, payment["id"])
    if latest is None:  # the gateway was never asked: failing is safe
        await finalize(conn, payment, FAILED, trace_id)
        return
    answer = latest.answer if latest.answer is not None else known
    if answer is not None:
        # A savepoint: a refused finalize (say an IdCollision) must not take the DLQ
        # row and the review mark down with it.
        await conn.execute("SAVEPOINT settle_dead")
        try:
            await record_answer(conn, payment["id"], answer)
            await finalize(conn, payment, status_of(answer), trace_id)
        except Exception as exc:
            refusal = classify(exc)
            if isinstance(refusal, RetryableError):
                raise
            await conn.execute("ROLLBACK TO SAVEPOINT settle_dead")
            note = (
                f"the gateway {'approved' if answer.approved else 'declined'} "
                f"(reference {answer.reference or '-'}) but finalizing was refused: "
                f"{type(refusal).__name__}: {refusal}"
            )
        else:
            await conn.execute("RELEASE SAVEPOINT settle_dead")
            return
    attempt = await mark_needs_review(conn, payment["id"], f"{note}; dead: {error}")
    log.error(
        "payflow.payments.needs_review",
        attempt=attempt,
        reason=note,
        error=error,
    )


async def dead_letter_payment(
    conn: Connection,
    payload: dict[str, Any],
    error: str,
    attempt: int,
    *,
    known: ChargeResult | None,
    note: str,
    trace_id: str | None,
    fallback: Mapping[str, str] | None = None,
) -> int:
    """Inside the caller's transaction: under the payment's row lock, settle a still
    pending payment (`settle_dead`, with the gateway answer `known` if
    one was asked outside the transaction) and record the DLQ row; returns its id.
    Shared by `on_dead` and the Redis DLQ drain (which asks no gateway: `known` None)."""
    raw = payload.get("payment_id")
    try:
        payment_id: UUID | None = UUID(str(raw))
    except ValueError:
        payment_id = None
    if payment_id is not None and await lock_payment(conn, payment_id) == "pending":
        payment = await load_payment(conn, payment_id)
        await settle_dead(conn, payment, known, note, error, trace_id)
    return await record_dead_letter(
        conn,
        source="payment",
        subject_id=str(raw),
        payload=payload,
        error=error,
        attempt=attempt,
        fallback=fallback,
    )


async def _redo_dead_payment(
    conn: Connection, entry: FallbackEntry, fallback: Mapping[str, str]
) -> int:
    """The Redis DLQ drain's redo of a payment's `on_dead` (`dead_letter_payment`), which
    asks no gateway: the answer is unknown, the note `PAYMENT_NOTE`."""
    return await dead_letter_payment(
        conn,
        entry.payload,
        entry.error,
        entry.attempt,
        known=None,
        note=PAYMENT_NOTE,
        trace_id=entry.trace_id,
        fallback=fallback,
    )


# What the Redis DLQ drain (`payflow.dlq.drain`) runs for a `payment` entry.
PAYMENT_DEAD_LETTERER = DeadLetterer("payment_id", _redo_dead_payment)
