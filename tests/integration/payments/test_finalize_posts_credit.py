"""`finalize_answered(post_credit=True)`: the answer step that also posts the merchant's
credit in its own commit through the ledger's one success path (`payment_finalize`,
migration 0022), on the real database. Every case ends with exactly one posting, or with
none and a job that lets the ledger worker decide."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from decimal import Decimal

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.db.tx import StatementBounds, transaction
from payflow.ledger.posting import post_event, posting_key
from payflow.ledger.records import Outcome
from payflow.payments.finalize import credit_event_id, finalize_answered
from payflow.payments.gateway import ChargeResult, EmulatedGateway
from tests.integration.ledger.helpers import open_at_balance_max
from tests.integration.payments.charges.workers import handle_all_after_barrier
from tests.integration.payments.test_finalize_answered import _claimed
from tests.integration.payments.test_held_credit import _merchant_with_account, _pending

BOUNDS = StatementBounds(lock_timeout_ms=300, statement_timeout_ms=5000)
APPROVED = ChargeResult(approved=True, reference="gw-1")
DECLINED = ChargeResult(approved=False, reason="card_declined", reference="gw-2")


async def _book(pool: asyncpg.Pool, account: uuid.UUID, event_id: str) -> tuple:
    """(balance, ledger rows of the event, event status, recorded outcome, credit jobs)."""
    return tuple(
        await pool.fetchrow(
            "SELECT (SELECT balance FROM accounts WHERE id = $1),"
            " (SELECT count(*) FROM balance_events WHERE source_event_id = $2),"
            " (SELECT status FROM payment_events WHERE event_id = $2),"
            " (SELECT outcome FROM processed_events WHERE idempotency_key = $3),"
            " (SELECT count(*) FROM outbox WHERE topic = 'ledger.event'"
            "    AND payload->>'event_id' = $2)",
            account,
            event_id,
            posting_key(event_id),
        )
    )


async def _held_credit_job(pool: asyncpg.Pool, event_id: str) -> bool:
    """True when the credit's one ledger.event job is held back (the fallback's job)."""
    [held] = await pool.fetch(
        "SELECT next_attempt_at > now() AS held FROM outbox"
        " WHERE topic = 'ledger.event' AND payload->>'event_id' = $1",
        event_id,
    )
    return bool(held["held"])


async def test_an_approval_posts_its_credit_in_the_same_commit_with_no_job(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    event_id = credit_event_id(payment["id"])
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn, payment, APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS, post_credit=True
        )
    assert done.changed and done.held_credit is None and done.posted == Decimal("7.50")
    assert await _book(pool, account, event_id) == (Decimal("7.50"), 1, "confirmed", "success", 0)
    status = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment["id"])
    assert status == "succeeded"
    # Any later delivery of the credit (a sweep, an operator) replays the recorded posting.
    replay = await post_event(pool, settings, event_id)
    assert (replay.outcome, replay.replayed) == (Outcome.SUCCESS, True)
    assert await _book(pool, account, event_id) == (Decimal("7.50"), 1, "confirmed", "success", 0)


async def test_a_decline_posts_nothing(pool: asyncpg.Pool, settings: Settings) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn, payment, DECLINED, None, bounds=BOUNDS, post_credit=True
        )
    assert done.changed and done.posted is None and done.held_credit is None
    event_id = credit_event_id(payment["id"])
    assert await _book(pool, account, event_id) == (Decimal("0"), 0, None, None, 0)


async def test_a_contended_account_finalizes_without_posting_and_holds_the_job(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """The account's row lock is held elsewhere past the bound: the posting statement
    writes nothing, the finalize is sent again without posting, and the credit waits in
    its held job (the worker's `post_held_credit` or the ledger worker posts it)."""
    merchant, account = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    event_id = credit_event_id(payment["id"])
    async with pool.acquire() as other, transaction(other, settings):
        # What a concurrent posting holds (its balance UPDATE): FOR NO KEY UPDATE, which
        # the credit event's foreign key check (FOR KEY SHARE) does not wait for.
        await other.execute("SELECT id FROM accounts WHERE id = $1 FOR NO KEY UPDATE", account)
        async with pool.acquire() as conn:
            done = await asyncio.wait_for(
                finalize_answered(
                    conn,
                    payment,
                    APPROVED,
                    None,
                    credit_hold_s=30.0,
                    bounds=BOUNDS,
                    post_credit=True,
                ),
                timeout=5,
            )
    assert done.changed and done.posted is None
    assert done.held_credit is not None and done.held_credit[0] == event_id
    assert await _book(pool, account, event_id) == (Decimal("0"), 0, "pending", None, 1)
    assert await _held_credit_job(pool, event_id)
    result = await post_event(pool, settings, event_id)
    assert (result.outcome, result.replayed) == (Outcome.SUCCESS, False)
    assert await _book(pool, account, event_id) == (Decimal("7.50"), 1, "confirmed", "success", 1)


async def test_an_overflowing_credit_finalizes_and_leaves_the_decision_to_the_full_path(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    await open_at_balance_max(owner_pool, account)
    before = await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account)
    payment = await _claimed(pool, settings, merchant)
    event_id = credit_event_id(payment["id"])
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn, payment, APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS, post_credit=True
        )
    assert done.changed and done.posted is None and done.held_credit is not None
    assert await _book(pool, account, event_id) == (before, 0, "pending", None, 1)
    result = await post_event(pool, settings, event_id)
    assert result.outcome is Outcome.AMOUNT_OVERFLOW
    assert await _book(pool, account, event_id) == (before, 0, "failed", "amount_overflow", 1)


async def test_a_taken_posting_key_leaves_a_job_due_now_for_the_full_path(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    """A claim already under the credit's key (written by someone else: a fresh derived
    event cannot have one) makes the success path answer NULL: nothing is posted and the
    credit's job is due at once, so the full path replays the recorded outcome."""
    merchant, account = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    event_id = credit_event_id(payment["id"])
    await owner_pool.execute(
        "INSERT INTO processed_events (idempotency_key, event_id, outcome)"
        " VALUES ($1, $2, 'success')",
        posting_key(event_id),
        event_id,
    )
    async with pool.acquire() as conn:
        done = await finalize_answered(
            conn, payment, APPROVED, None, credit_hold_s=30.0, bounds=BOUNDS, post_credit=True
        )
    assert done.changed and done.posted is None and done.held_credit is None
    assert await _book(pool, account, event_id) == (Decimal("0"), 0, "pending", "success", 1)
    assert not await _held_credit_job(pool, event_id)


@pytest.mark.parametrize("approved", [True, False])
async def test_a_second_answer_changes_nothing(
    pool: asyncpg.Pool, settings: Settings, approved: bool
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment = await _claimed(pool, settings, merchant)
    event_id = credit_event_id(payment["id"])
    async with pool.acquire() as conn:
        first = await finalize_answered(
            conn, payment, APPROVED, None, bounds=BOUNDS, post_credit=True
        )
        again = await finalize_answered(
            conn,
            payment,
            APPROVED if approved else DECLINED,
            None,
            bounds=BOUNDS,
            post_credit=True,
        )
    assert first.changed and not again.changed and again.posted is None
    assert await _book(pool, account, event_id) == (Decimal("7.50"), 1, "confirmed", "success", 0)


async def test_processes_finalizing_one_merchants_payments_at_once_credit_each_once(
    pool: asyncpg.Pool, settings: Settings, database_url: str, redis: Redis, key_prefix: str
) -> None:
    """Four OS processes each handle a delivery of the same 40 payments of one merchant at
    once: every payment is charged and finalized once, and its credit, posted in the
    finalize's commit on the merchant's one (hot) account, lands once. Each process
    finalizes its answers of that account together (`FinalizeCoalescer`), so batches of
    different processes meet on the account's row."""
    merchant, account = await _merchant_with_account(pool)
    payments = [await _pending(pool, settings, merchant) for _ in range(40)]
    prefix = key_prefix
    context = multiprocessing.get_context("spawn")

    def run() -> list[int]:
        with context.Manager() as manager:
            barrier = manager.Barrier(4)
            with context.Pool(4) as workers:
                ids = [str(p) for p in payments]
                return workers.starmap(
                    handle_all_after_barrier, [(database_url, prefix, ids, barrier)] * 4
                )

    handled = await asyncio.to_thread(run)
    assert 40 <= sum(handled) <= 160, handled
    emulator = EmulatedGateway(redis, prefix, 0.0, 0.0, 0.0)
    assert [await emulator.charge_count(p) for p in payments] == [1] * 40
    # A credit the finalize could not post is held for the ledger worker: post those.
    for row in await pool.fetch("SELECT event_id FROM payment_events WHERE status <> 'confirmed'"):
        await post_event(pool, settings, row["event_id"])
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == (
        Decimal("7.50") * 40
    )
    assert (
        await pool.fetchval("SELECT count(*) FROM balance_events WHERE account_id = $1", account)
        == 40
    )
    assert (
        await pool.fetchval(
            "SELECT count(DISTINCT source_event_id) FROM balance_events WHERE account_id = $1",
            account,
        )
        == 40
    )
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM payments WHERE merchant_id = $1 AND status = 'succeeded'",
            merchant,
        )
        == 40
    )
