"""An id payflow derives (`payment:<uuid>`) that is already taken stops the transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import IdCollision
from payflow.payments.finalize import SUCCEEDED, credit_event_id, finalize
from payflow.payments.gateway import EmulatedGateway
from payflow.payments.processor import PaymentProcessor
from payflow.payments.records import load_payment
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.payments.charges.support import (
    announced_jobs,
    attempt_states,
    payment_status,
    pending_payment,
)
from tests.integration.payments.charges.workers import payment_created


async def _foreign_row(owner_pool: asyncpg.Pool, payment_id: uuid.UUID) -> uuid.UUID:
    """Someone else's event at the id payflow derives for the payment's credit."""
    async with owner_pool.acquire() as conn:
        account: uuid.UUID = await conn.fetchval(
            "INSERT INTO accounts (asset) VALUES ('USD') RETURNING id"
        )
        await conn.execute(
            "INSERT INTO payment_events (event_id, account_id, amount, event_type)"
            " VALUES ($1, $2, 1000, 'deposit')",
            credit_event_id(payment_id),
            account,
        )
    return account


@pytest.mark.parametrize("account_exists", [False, True])
async def test_finalize_refuses_a_taken_payment_event_id(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    charge_settings: Settings,
    account_exists: bool,
) -> None:
    """`payment:<id>` already in payment_events: finalizing stops with IdCollision and
    commits nothing (both paths: the one-statement CTE when the merchant's settlement
    account exists, and the first-success path that opens it)."""
    merchant, payment_id = await pending_payment(pool, charge_settings, "https://example.com/h")
    if account_exists:
        earlier = await DirectSubmitter(pool, charge_settings).submit_payment(
            merchant, "1.00", "USD", uuid.uuid4().hex, None
        )
        async with pool.acquire() as conn, transaction(conn, charge_settings):
            assert await finalize(conn, await load_payment(conn, earlier), SUCCEEDED, None)
    foreign = await _foreign_row(owner_pool, payment_id)
    async with pool.acquire() as conn:
        payment = await load_payment(conn, payment_id)
    events_before = await pool.fetchval("SELECT count(*) FROM payment_events")
    outbox_before = await pool.fetchval("SELECT count(*) FROM outbox")

    with pytest.raises(IdCollision):
        async with pool.acquire() as conn, transaction(conn, charge_settings):
            await finalize(conn, payment, SUCCEEDED, None)

    assert await payment_status(pool, payment_id) == "pending"
    assert await pool.fetchval("SELECT count(*) FROM payment_events") == events_before
    assert await pool.fetchval("SELECT count(*) FROM outbox") == outbox_before
    row = await pool.fetchrow(
        "SELECT account_id, amount, event_type FROM payment_events WHERE event_id = $1",
        credit_event_id(payment_id),
    )
    assert tuple(row) == (foreign, Decimal(1000), "deposit")


async def test_worker_meeting_a_taken_credit_id_parks_the_charge_for_review(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    charge_settings: Settings,
    emulator: Callable[..., EmulatedGateway],
) -> None:
    """The gateway approved, but the credit id is taken: the answer cannot finalize.
    The handler fails with IdCollision (a non-retryable error), on_dead learns the
    approval from payment_status() and, refused again, leaves the payment pending for review,
    never failed and never crediting the foreign row's account."""
    _, payment_id = await pending_payment(pool, charge_settings, "https://example.com/h")
    await _foreign_row(owner_pool, payment_id)
    processor = PaymentProcessor(pool, charge_settings, emulator(), database=charge_settings)
    with pytest.raises(IdCollision) as raised:
        await processor.handle(payment_created(payment_id))
    await processor.on_dead(payment_created(payment_id), raised.value)

    assert await payment_status(pool, payment_id) == "pending"
    assert await emulator().charge_count(payment_id) == 1
    assert await attempt_states(pool, payment_id) == [(1, "needs_review")]
    reason = await pool.fetchval("SELECT reason FROM charge_attempts")
    assert "approved" in reason and "IdCollision" in reason
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1
    assert await announced_jobs(pool, payment_id) == []
