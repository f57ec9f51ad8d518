"""Every one-statement step of the payment worker and the webhook sender runs outside a
transaction, so no `SET LOCAL lock_timeout` covers it: each sets `lock_timeout` for its own
implicit transaction first. Against a payment row held by another session (an operator's
open transaction, say) each gives up with 55P03 (retryable) instead of waiting for ever
and taking a pooled connection with it, and writes nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds, transaction
from payflow.errors import RetryableError, classify
from payflow.payments.charges import claim_first_charge
from payflow.payments.finalize import finalize_answered
from payflow.payments.gateway import ChargeResult
from payflow.payments.records import load_payment
from payflow.payments.service import NewPayment, create_payment
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.payments.test_held_credit import _merchant_with_account, _pending

SQL = load_queries("payflow.webhooks")
BOUND_MS = 300
BOUNDS = StatementBounds(lock_timeout_ms=BOUND_MS, statement_timeout_ms=30_000)

Step = Callable[[asyncpg.Connection, uuid.UUID], Awaitable[object]]


async def _claim(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    return (await claim_first_charge(conn, payment_id, "token", 30.0, BOUNDS))[1]


async def _answer(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    payment = await load_payment(conn, payment_id)
    approved = ChargeResult(approved=True, reference="gw")
    return await finalize_answered(conn, payment, approved, None, bounds=BOUNDS)


async def _webhook_claim(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    return await conn.fetchrow(
        SQL["claim_fresh_webhook"], payment_id, "token", 30.0, "m-1", 1, BOUND_MS
    )


async def _webhook_record(conn: asyncpg.Connection, payment_id: uuid.UUID) -> object:
    return await conn.fetchrow(
        SQL["record_webhook_attempt"], payment_id, True, "token", None, 2, 200, None, BOUND_MS, None
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


async def test_api_create_gives_up_after_lock_timeout_and_writes_nothing(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """The API's create statement runs outside a transaction too. A concurrent writer of
    the same merchant and key (here an open transaction that inserted the payment row
    without the key's advisory lock) makes its insert wait on the unique key: the bound
    ends that wait with 55P03 (retryable: 503 at the API), and nothing is written."""
    merchant, _ = await _merchant_with_account(pool)
    key = uuid.uuid4().hex
    new = NewPayment(Decimal("7.50"), "USD", None, {}, None)
    outbox_before = await pool.fetchval("SELECT count(*) FROM outbox")
    async with pool.acquire() as holder, transaction(holder, settings):
        await holder.execute(
            "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, metadata)"
            " VALUES ($1, 7.50, 'USD', $2, '{}')",
            merchant,
            key,
        )
        async with pool.acquire() as conn:
            with pytest.raises(asyncpg.LockNotAvailableError) as raised:
                await asyncio.wait_for(
                    create_payment(
                        conn,
                        merchant,
                        new,
                        idempotency_key=key,
                        request_hash="h",
                        trace_id="t",
                        bounds=BOUNDS,
                    ),
                    timeout=30,
                )
            assert not conn.is_in_transaction()
        await holder.execute("ROLLBACK; BEGIN")  # the holder's row goes too
    assert isinstance(classify(raised.value), RetryableError)
    assert (
        await pool.fetchval("SELECT count(*) FROM payments WHERE merchant_id = $1", merchant) == 0
    )
    assert (
        await pool.fetchval("SELECT count(*) FROM api_idempotency WHERE merchant_id = $1", merchant)
        == 0
    )
    assert await pool.fetchval("SELECT count(*) FROM outbox") == outbox_before


async def test_api_create_refuses_a_transaction() -> None:
    """It commits by itself, so it must not run inside a caller's transaction."""

    class InTransaction:
        def is_in_transaction(self) -> bool:
            return True

    with pytest.raises(RuntimeError, match="outside a transaction"):
        await create_payment(
            InTransaction(),  # type: ignore[arg-type]
            uuid.uuid4(),
            NewPayment(Decimal("1.00"), "USD", None, {}, None),
            idempotency_key="k",
            request_hash="h",
            trace_id="t",
            bounds=BOUNDS,
        )
