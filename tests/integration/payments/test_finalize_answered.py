"""`finalize_answered`: the payment worker's answer step in one autocommitted statement
(record the gateway's answer on the open attempt, finalize, credit and webhook jobs), on
the real database. What it does not decide, it leaves untouched for the transaction."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import StatementBounds, transaction
from payflow.payments.charges import claim_first_charge
from payflow.payments.finalize import credit_event_id, finalize_answered
from payflow.payments.gateway import ChargeResult
from payflow.payments.records import load_payment
from tests.integration.payments.test_held_credit import _merchant_with_account, _pending

BOUNDS = StatementBounds(lock_timeout_ms=2000, statement_timeout_ms=5000)

APPROVED = ChargeResult(approved=True, reference="gw-1")
DECLINED = ChargeResult(approved=False, reason="card_declined", reference="gw-2")


async def _claimed(pool: asyncpg.Pool, settings: Settings, merchant: uuid.UUID):
    payment_id = await _pending(pool, settings, merchant)
    async with pool.acquire() as conn:
        assert (await claim_first_charge(conn, payment_id, "token", 30.0, BOUNDS))[1] is not None
        return await load_payment(conn, payment_id)


async def _state(pool: asyncpg.Pool, payment_id: uuid.UUID) -> tuple:
    return tuple(
        await pool.fetchrow(
            "SELECT p.status, a.state, a.reason, a.gateway_reference,"
            " (SELECT count(*) FROM payment_events WHERE event_id = $2) AS credits,"
            " (SELECT count(*) FROM outbox WHERE topic <> 'payment.created'"
            "   AND (payload->>'payment_id' = $3 OR payload->>'event_id' = $2)) AS jobs"
            " FROM payments p JOIN charge_attempts a ON a.payment_id = p.id WHERE p.id = $1",
            payment_id,
            credit_event_id(payment_id),
            str(payment_id),
        )
    )


async def test_an_approval_is_recorded_and_finalized_in_one_statement(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn, payment, APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS
        )
    assert done.changed
    assert done.held_credit is not None and done.held_credit[0] == credit_event_id(payment["id"])
    assert await _state(pool, payment["id"]) == ("succeeded", "approved", "", "gw-1", 1, 2)
    async with pool.acquire() as conn:  # a second answer finds nothing open: no change
        again = await finalize_answered(conn, payment, DECLINED, None, bounds=BOUNDS)
    assert not again.changed
    assert await _state(pool, payment["id"]) == ("succeeded", "approved", "", "gw-1", 1, 2)


async def test_a_decline_needs_no_account(pool: asyncpg.Pool, settings: Settings) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)
    payment = await _claimed(pool, settings, merchant)
    async with pool.acquire() as conn:
        done = await finalize_answered(conn, payment, DECLINED, None, bounds=BOUNDS)
    assert done.changed and done.held_credit is None
    assert await _state(pool, payment["id"]) == (
        "failed",
        "declined",
        "card_declined",
        "gw-2",
        0,
        1,
    )


async def test_a_first_success_without_its_account_writes_nothing(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)
    payment = await _claimed(pool, settings, merchant)
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn, payment, APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS
        )
    assert not done.changed  # the transactional step opens the account
    assert await _state(pool, payment["id"]) == ("pending", "claimed", "", "", 0, 0)


async def test_a_payment_without_an_open_attempt_is_left_alone(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    async with pool.acquire() as conn:
        payment = await load_payment(conn, payment_id)
        assert not (await finalize_answered(conn, payment, APPROVED, None, bounds=BOUNDS)).changed
    status = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    assert status == "pending"


async def test_it_refuses_to_run_inside_a_transaction(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    async with pool.acquire() as conn, transaction(conn, settings):
        with pytest.raises(RuntimeError):
            await finalize_answered(conn, payment, APPROVED, None, bounds=BOUNDS)
