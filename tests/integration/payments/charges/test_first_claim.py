"""`claim_first_charge`: a payment's first claim in one autocommitted statement, on the
real database. It claims only what the full claim would, and otherwise writes nothing.
(The race between deliveries in separate processes is in test_claims.py, whose workers
take this path first.)"""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.tx import StatementBounds, transaction
from payflow.errors import NotFound
from payflow.payments.charges import Claim, claim_charge, claim_first_charge
from tests.integration.payments.charges.support import (
    attempt_states,
    claim_as_dying_worker,
    pending_payment,
)

BOUNDS = StatementBounds(lock_timeout_ms=2000, statement_timeout_ms=5000)


async def test_the_first_claim_is_attempt_one_under_a_lease(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    _, payment_id = await pending_payment(pool, settings)
    async with pool.acquire() as conn:
        payment, claim = await claim_first_charge(conn, payment_id, "token-a", 30.0, BOUNDS)
    assert (payment["id"], payment["status"], payment["amount"]) == (
        payment_id,
        "pending",
        Decimal("5.00"),
    )
    assert isinstance(claim, Claim)
    assert (claim.attempt, claim.token, claim.recovering) == (1, "token-a", False)
    row = await pool.fetchrow(
        "SELECT attempt_id, state, claimed_by, lease_until > clock_timestamp() AS live"
        " FROM charge_attempts WHERE payment_id = $1",
        payment_id,
    )
    assert tuple(row) == (claim.attempt_id, "claimed", "token-a", True)
    # A second delivery finds the attempt: nothing written, the full claim decides
    # (and sees the live claim).
    async with pool.acquire() as conn:
        assert (await claim_first_charge(conn, payment_id, "token-b", 30.0, BOUNDS))[1] is None
    assert await attempt_states(pool, payment_id) == [(1, "claimed")]


async def test_an_expired_earlier_attempt_is_left_to_the_full_claim(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    _, payment_id = await pending_payment(pool, settings)
    await claim_as_dying_worker(pool, settings, payment_id, lease_s=0.0)
    async with pool.acquire() as conn:
        assert (await claim_first_charge(conn, payment_id, "token-b", 30.0, BOUNDS))[1] is None
        async with transaction(conn, settings):
            recovering = await claim_charge(conn, payment_id, "token-b", 30.0)
    assert isinstance(recovering, Claim) and recovering.recovering
    assert await attempt_states(pool, payment_id) == [(1, "superseded"), (2, "claimed")]


async def test_a_final_payment_is_never_claimed(pool: asyncpg.Pool, settings: Settings) -> None:
    _, payment_id = await pending_payment(pool, settings)
    await pool.execute(
        "UPDATE payments SET status = 'failed', processed_at = now() WHERE id = $1",
        payment_id,
    )
    async with pool.acquire() as conn:
        payment, claim = await claim_first_charge(conn, payment_id, "token-a", 30.0, BOUNDS)
    assert (payment["status"], claim) == ("failed", None)
    assert await attempt_states(pool, payment_id) == []


async def test_it_refuses_to_run_inside_a_transaction(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    _, payment_id = await pending_payment(pool, settings)
    async with pool.acquire() as conn, transaction(conn, settings):
        with pytest.raises(RuntimeError):
            await claim_first_charge(conn, payment_id, "token-a", 30.0, BOUNDS)


async def test_an_unknown_payment_is_not_found(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        with pytest.raises(NotFound):
            await claim_first_charge(conn, uuid.uuid4(), "token-a", 30.0, BOUNDS)


async def test_a_duplicate_of_a_final_payment_reads_it_without_waiting_for_its_lock(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """Only a pending payment is locked: a duplicate delivery of a final one is answered
    from a plain read even while another session (the webhook sender, say) holds the row."""
    _, payment_id = await pending_payment(pool, settings)
    await pool.execute(
        "UPDATE payments SET status = 'succeeded', processed_at = now() WHERE id = $1",
        payment_id,
    )
    async with pool.acquire() as holder, transaction(holder, settings):
        await holder.execute("SELECT 1 FROM payments WHERE id = $1 FOR UPDATE", payment_id)
        async with pool.acquire() as conn:
            quick = StatementBounds(lock_timeout_ms=200, statement_timeout_ms=5000)
            payment, claim = await claim_first_charge(conn, payment_id, "token-a", 30.0, quick)
    assert (payment["status"], claim) == ("succeeded", None)
    assert await attempt_states(pool, payment_id) == []
