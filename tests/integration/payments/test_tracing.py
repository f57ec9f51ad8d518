"""Derived rows inherit their parent's trace id: a finalised payment's credit event and
its `ledger.event` / `webhook.deliver` jobs carry the payment's stored trace id, whatever
trace the message that finalised it carried (a message without one included)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.observability import is_trace_id
from payflow.payments.finalize import SUCCEEDED, credit_event_id, finalize
from payflow.payments.records import load_payment
from payflow_lab.bench.submit import DirectSubmitter

MESSAGE_TRACE = "11111111111111111111111111111111"


async def _traces(pool: asyncpg.Pool, payment_id: uuid.UUID) -> list[tuple[str, str | None]]:
    """(what, trace_id) for the credit event and every job the finalisation wrote."""
    event = await pool.fetchval(
        "SELECT trace_id FROM payment_events WHERE event_id = $1", credit_event_id(payment_id)
    )
    jobs = await pool.fetch(
        "SELECT topic, trace_id FROM outbox WHERE topic <> 'payment.created' ORDER BY topic"
    )
    return [("credit event", event), *((row["topic"], row["trace_id"]) for row in jobs)]


@pytest.mark.parametrize("message_trace", [None, MESSAGE_TRACE])
async def test_finalised_payment_rows_carry_the_payments_trace(
    pool: asyncpg.Pool, settings: Settings, message_trace: str | None
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "m", admin=False)
    payment_id = await DirectSubmitter(pool, settings).submit_payment(
        merchant, "5.00", "USD", uuid.uuid4().hex, "https://example.com/hook"
    )
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        assert await finalize(conn, payment, SUCCEEDED, message_trace)
    trace = payment["trace_id"]
    assert is_trace_id(trace) and trace != MESSAGE_TRACE
    assert await _traces(pool, payment_id) == [
        ("credit event", trace),
        ("ledger.event", trace),
        ("webhook.deliver", trace),
    ]


async def test_payment_stored_without_a_trace_takes_the_messages(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "m", admin=False)
    payment_id = await DirectSubmitter(pool, settings).submit_payment(
        merchant, "5.00", "USD", uuid.uuid4().hex, "https://example.com/hook"
    )
    # A payment from before traces were kept (the service may not rewrite trace_id).
    await owner_pool.execute("UPDATE payments SET trace_id = NULL WHERE id = $1", payment_id)
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        assert await finalize(conn, payment, SUCCEEDED, MESSAGE_TRACE)
    assert await _traces(pool, payment_id) == [
        ("credit event", MESSAGE_TRACE),
        ("ledger.event", MESSAGE_TRACE),
        ("webhook.deliver", MESSAGE_TRACE),
    ]
