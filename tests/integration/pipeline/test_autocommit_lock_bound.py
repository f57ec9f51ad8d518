"""Every one-statement step of the payment worker and the webhook sender runs outside a
transaction, so no `SET LOCAL lock_timeout` covers it: each sets `lock_timeout` for its own
implicit transaction first. Against a payment row held by another session (an operator's
open transaction, say) each gives up with 55P03 (retryable) instead of waiting for ever
and taking a pooled connection with it, and writes nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from payflow.bench.submit import DirectSubmitter
from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import RetryableError, classify
from payflow.payments.charges import claim_first_charge
from payflow.payments.finalize import finalize_answered
from payflow.payments.gateway import ChargeResult
from payflow.payments.processor import load_payment
from tests.integration.pipeline.test_held_credit import _merchant_with_account, _pending

SQL = load_queries("payflow.payments")
BOUND_MS = 300

Step = Callable[[asyncpg.Connection, uuid.UUID], Awaitable[object]]


async def _claim(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    return await claim_first_charge(conn, payment_id, "token", 30.0, BOUND_MS)


async def _answer(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    payment = await load_payment(conn, payment_id)
    approved = ChargeResult(approved=True, reference="gw")
    return await finalize_answered(conn, payment, approved, None, lock_timeout_ms=BOUND_MS)


async def _webhook_claim(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    return await conn.fetchrow(
        SQL["claim_fresh_webhook"], payment_id, "token", 30.0, "m-1", 1, BOUND_MS
    )


async def _webhook_record(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    return await conn.fetchrow(
        SQL["record_webhook_attempt"], payment_id, True, "token", None, 2, 200, None, BOUND_MS
    )


@pytest.mark.parametrize(
    "step",
    [_claim, _answer, _webhook_claim, _webhook_record],
    ids=["claim_first_charge", "finalize_answered", "claim_fresh_webhook", "record_attempt"],
)
async def test_a_held_payment_row_makes_the_step_give_up_after_lock_timeout(
    pool: asyncpg.Pool, settings: Settings, submitter: DirectSubmitter, step: Step
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    if step in (_webhook_claim, _webhook_record):  # a final payment, as the sender sees it
        await pool.execute(
            "UPDATE payments SET status = 'succeeded', processed_at = now() WHERE id = $1",
            payment_id,
        )
    elif step is _answer:  # an open attempt to answer
        async with pool.acquire() as conn:
            assert await _claim(conn, payment_id) is not None
    before = tuple(await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id))
    async with pool.acquire() as holder, transaction(holder, settings):
        await holder.execute("SELECT 1 FROM payments WHERE id = $1 FOR UPDATE", payment_id)
        async with pool.acquire() as conn:
            with pytest.raises(asyncpg.LockNotAvailableError) as raised:
                # Without the bound this waits until wait_for gives up: TimeoutError.
                await asyncio.wait_for(step(conn, payment_id), timeout=30)
            assert not conn.is_in_transaction()
    assert isinstance(classify(raised.value), RetryableError)
    after = tuple(await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id))
    assert after == before
    attempts = await pool.fetchval(
        "SELECT count(*) FROM webhook_attempt_log WHERE payment_id = $1", payment_id
    )
    assert attempts == 0
