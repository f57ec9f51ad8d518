"""Database-side sweeps: a payment or webhook job the broker lost is re-announced from
PostgreSQL and done exactly once; nothing piles up; a dead-lettered webhook stays dead."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.ops.dlq_replay import replay_dead_letter
from payflow.payments.sweeps import sweep_pending_payments
from payflow.webhooks.sweeps import sweep_undelivered_webhooks
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import queue_depth, rabbitmqctl, wait_until

LONG_AGO = "now() - interval '1 day'"


async def test_payment_whose_announcement_was_lost_is_swept_and_processed_once(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    payment_id = await submitter.submit_payment(merchant[0], "25.50", "USD", "k-lost", sink.url)
    await owner_pool.execute(f"UPDATE payments SET created_at = {LONG_AGO}")
    # Its payment.created row still waits for the relay: nothing to re-announce.
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 0
    lose = "UPDATE outbox SET published_at = now() WHERE topic = 'payment.created'"
    await owner_pool.execute(lose)  # confirmed, then lost inside the broker
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 1
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 0  # row unpublished
    await owner_pool.execute(lose)  # lost once more
    # Backing off: the second re-announcement waits 2 x PAYMENT_SWEEP_AFTER_S.
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 0
    await owner_pool.execute(f"UPDATE payments SET payment_swept_at = {LONG_AGO}")
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 1
    assert await pool.fetchval("SELECT payment_sweeps FROM payments") == 2
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 1

    await start_roles()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="payment processed and notified",
    )
    payment = await pool.fetchrow("SELECT status, merchant_id FROM payments")
    assert payment["status"] == "succeeded"
    await wait_until(
        lambda: pool.fetchval(
            "SELECT balance = 25.50 FROM accounts WHERE merchant_id = $1", merchant[0]
        ),
        what="merchant credited",
    )
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
    assert len(sink.received) == 1
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 0  # final now


async def test_webhook_job_lost_in_the_broker_is_swept_and_delivered_once(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    vhost: str,
    start_roles,
) -> None:
    running = await start_roles(worker_queues=("payments", "ledger"))
    payment_id = await submitter.submit_payment(merchant[0], "3.00", "EUR", "k-wh", sink.url)
    await wait_until(
        lambda: pool.fetchval("SELECT status = 'succeeded' FROM payments"), what="final payment"
    )
    await wait_until(
        lambda: queue_depth(pipe_settings, "payflow.webhooks"), what="webhook job queued"
    )
    await running.stop()
    rabbitmqctl("purge_queue", "-p", vhost, "payflow.webhooks")  # the broker lost it
    # Not overdue yet: the job may still be on its way through the retry tiers.
    assert (
        await sweep_undelivered_webhooks(pool, pipe_settings, database=pipe_settings)
    ).announced == 0
    await owner_pool.execute(f"UPDATE payments SET processed_at = {LONG_AGO}")
    assert (
        await sweep_undelivered_webhooks(pool, pipe_settings, database=pipe_settings)
    ).announced == 1
    assert (
        await sweep_undelivered_webhooks(pool, pipe_settings, database=pipe_settings)
    ).announced == 0

    await start_roles()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="webhook delivered after the sweep",
    )
    assert len(sink.received) == 1
    await owner_pool.execute(f"UPDATE payments SET webhook_swept_at = {LONG_AGO}")
    assert (
        await sweep_undelivered_webhooks(pool, pipe_settings, database=pipe_settings)
    ).announced == 0  # delivered
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1


async def test_dead_lettered_webhook_is_never_resent_by_the_sweep(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    sink.status_for = lambda _r: 503
    await start_roles()
    payment_id = await submitter.submit_payment(merchant[0], "4.00", "USD", "k-dead", sink.url)
    dlq_id = await wait_until(
        lambda: pool.fetchval(
            "SELECT id FROM dead_letter_queue WHERE source = 'webhook' AND subject_id = $1",
            str(payment_id),
        ),
        what="webhook dead letter",
    )
    marked = await pool.fetchrow(
        "SELECT webhook_dead_at, webhook_delivered_at FROM payments WHERE id = $1", payment_id
    )
    assert marked["webhook_dead_at"] is not None
    assert marked["webhook_delivered_at"] is None
    await owner_pool.execute(f"UPDATE payments SET processed_at = {LONG_AGO}")
    assert (
        await sweep_undelivered_webhooks(pool, pipe_settings, database=pipe_settings)
    ).announced == 0
    assert len(sink.received) == 1 + len(pipe_settings.retry_tiers_ms)

    # A manual replay hands it back: the marker is cleared, the delivery recorded.
    sink.status_for = lambda _r: 200
    await replay_dead_letter(pool, pipe_settings, dlq_id, operator="erin")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivered after the replay",
    )
    assert (
        await pool.fetchval("SELECT webhook_dead_at FROM payments WHERE id = $1", payment_id)
        is None
    )
    assert await pool.fetchval(
        "SELECT balance FROM accounts WHERE merchant_id = $1", merchant[0]
    ) == (Decimal("4.00"))


async def test_sweeps_run_on_one_replica_at_a_time(
    pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    async with pool.acquire() as other, transaction(other, pipe_settings):
        assert await job_lock(other, "sweep_pending_payments")
        assert await job_lock(other, "sweep_undelivered_webhooks")
        assert (await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)).skipped
        assert (
            await sweep_undelivered_webhooks(pool, pipe_settings, database=pipe_settings)
        ).skipped
