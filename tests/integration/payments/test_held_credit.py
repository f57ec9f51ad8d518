"""A payment's credit posted by the worker that finalized it, right after the commit, with
its ledger.event job held back as the guarantee (`post_held_credit`), on the real database
and the Redis-backed gateway emulator: every case ends with exactly one posting."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.posting import post_event, post_held_credit
from payflow.ledger.records import Outcome
from payflow.payments.finalize import (
    SUCCEEDED,
    credit_event_id,
    finalize_payment,
    merchant_account,
)
from payflow.payments.processor import PaymentProcessor
from payflow.payments.records import load_payment
from payflow.roles import default_gateway
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.ledger.helpers import open_at_balance_max
from tests.integration.payments.charges.workers import payment_created


async def _merchant_with_account(pool: asyncpg.Pool) -> tuple[uuid.UUID, uuid.UUID]:
    """A merchant whose USD settlement account exists (the held path needs it)."""
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)
        async with transaction(conn, Settings()):
            account = await merchant_account(conn, merchant, "USD")
    return merchant, account


async def _pending(pool: asyncpg.Pool, settings: Settings, merchant: uuid.UUID) -> uuid.UUID:
    return await DirectSubmitter(pool, settings).submit_payment(
        merchant, "7.50", "USD", uuid.uuid4().hex, "https://example.com/hook"
    )


async def _finalize_held(
    pool: asyncpg.Pool, settings: Settings, payment_id: uuid.UUID, hold_s: float
) -> tuple[str, int]:
    """Finalize as the worker does, then stop (the worker dies before posting)."""
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        done = await finalize_payment(conn, payment, SUCCEEDED, None, credit_hold_s=hold_s)
    assert done.changed and done.held_credit is not None
    return done.held_credit


async def _ledger_rows(pool: asyncpg.Pool, event_id: str) -> int:
    rows: int = await pool.fetchval(
        "SELECT count(*) FROM balance_events WHERE source_event_id = $1", event_id
    )
    return rows


async def _credit_jobs(pool: asyncpg.Pool, event_id: str) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT id, published_at, next_attempt_at > now() AS held FROM outbox"
        " WHERE topic = 'ledger.event' AND payload->>'event_id' = $1",
        event_id,
    )


async def test_the_worker_posts_the_credit_and_deletes_its_job(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    worker_settings = settings.model_copy(update={"gateway_failure_rate": 0.0})
    redis = Redis.from_url(settings.redis_url)
    try:
        processor = PaymentProcessor(
            pool,
            worker_settings,
            default_gateway(worker_settings, redis, redis_settings=worker_settings),
            database=worker_settings,
        )
        await processor.handle(payment_created(payment_id))
    finally:
        await redis.aclose()
    event_id = credit_event_id(payment_id)
    assert await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id) == (
        SUCCEEDED
    )
    assert await pool.fetchval(
        "SELECT status FROM payment_events WHERE event_id = $1", event_id
    ) == ("confirmed")
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == (
        Decimal("7.50")
    )
    assert await _ledger_rows(pool, event_id) == 1
    assert await _credit_jobs(pool, event_id) == []  # settled in the posting's commit
    webhook_jobs = await pool.fetchval(
        "SELECT count(*) FROM outbox WHERE topic = 'webhook.deliver'"
        " AND payload->>'payment_id' = $1",
        str(payment_id),
    )
    assert webhook_jobs == 1


async def test_a_worker_that_dies_before_posting_leaves_a_held_job_for_the_relay(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    event_id, job_id = await _finalize_held(pool, settings, payment_id, hold_s=1.0)
    [job] = await _credit_jobs(pool, event_id)
    assert job["id"] == job_id and job["held"] and job["published_at"] is None
    due_now = await pool.fetch(
        "SELECT id FROM outbox WHERE published_at IS NULL AND next_attempt_at <= now()"
    )
    assert job_id not in {row["id"] for row in due_now}  # the relay's claim skips it
    await asyncio.sleep(1.2)
    [job] = await _credit_jobs(pool, event_id)
    assert not job["held"]  # the hold ended: the relay publishes it
    result = await post_event(pool, settings, event_id)  # the ledger worker, later
    assert (result.outcome, result.replayed) == (Outcome.SUCCESS, False)
    assert await _ledger_rows(pool, event_id) == 1
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == (
        Decimal("7.50")
    )
    # A late shortcut (the worker came back) meets the recorded posting: nothing more.
    assert await post_held_credit(pool, settings, event_id, job_id) is None
    assert await _ledger_rows(pool, event_id) == 1


async def test_a_credit_that_overflows_releases_its_job_to_the_full_path(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    await open_at_balance_max(owner_pool, account)
    payment_id = await _pending(pool, settings, merchant)
    event_id, job_id = await _finalize_held(pool, settings, payment_id, hold_s=600.0)
    assert await post_held_credit(pool, settings, event_id, job_id) is None
    [job] = await _credit_jobs(pool, event_id)
    assert not job["held"]  # due now: the ledger worker decides at once
    result = await post_event(pool, settings, event_id)
    assert result.outcome is Outcome.AMOUNT_OVERFLOW
    assert await _ledger_rows(pool, event_id) == 0
    assert await pool.fetchval(
        "SELECT status FROM payment_events WHERE event_id = $1", event_id
    ) == ("failed")


async def test_a_relay_holding_the_job_never_blocks_the_posting(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    merchant, account = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    event_id, job_id = await _finalize_held(pool, settings, payment_id, hold_s=600.0)
    async with pool.acquire() as relay, transaction(relay, settings):
        # A relay has claimed the row (its claim_batch lock) and is publishing it.
        await relay.execute("SELECT id FROM outbox WHERE id = $1 FOR UPDATE", job_id)
        result = await asyncio.wait_for(
            post_held_credit(pool, settings, event_id, job_id), timeout=1.5
        )
        assert result is not None and result.outcome is Outcome.SUCCESS
    [job] = await _credit_jobs(pool, event_id)
    assert job["id"] == job_id  # left to the relay, whose message then replays
    replay = await post_event(pool, settings, event_id)
    assert (replay.outcome, replay.replayed) == (Outcome.SUCCESS, True)
    assert await _ledger_rows(pool, event_id) == 1
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == (
        Decimal("7.50")
    )


@pytest.mark.parametrize("hold_s", [0.0, 30.0])
async def test_the_held_job_is_written_only_when_asked(
    pool: asyncpg.Pool, settings: Settings, hold_s: float
) -> None:
    merchant, _ = await _merchant_with_account(pool)
    payment_id = await _pending(pool, settings, merchant)
    async with pool.acquire() as conn, transaction(conn, settings):
        payment = await load_payment(conn, payment_id)
        done = await finalize_payment(conn, payment, SUCCEEDED, None, credit_hold_s=hold_s)
    [job] = await _credit_jobs(pool, credit_event_id(payment_id))
    assert job["held"] is (hold_s > 0)
    assert (done.held_credit is not None) is (hold_s > 0)
