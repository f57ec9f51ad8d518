"""Webhook delivery that does not hold the database while it waits for a merchant.

A send claims a lease in one short transaction, POSTs with no transaction open and records
the result in a second one; the lease, not a row lock, keeps two sends of one job apart.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import pytest

from payflow.broker.messages import Envelope
from payflow.broker.topology import TOPIC_WEBHOOK_DELIVER
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.outbox.writer import enqueue
from payflow.webhooks.sender import WebhookSender, build_http_client, dead_letter_webhook
from payflow_lab.bench.sink import SinkProcess, WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import wait_until

SLOW_S = 2.0
WEBHOOKS = 500
POOL = 10


def _envelope(payment_id: uuid.UUID) -> Envelope:
    return Envelope(
        payload={"version": 1, "payment_id": str(payment_id)},
        message_id=f"m-{payment_id}",
        routing_key="webhook.deliver",
        trace_id="",
        attempt=1,
        body=b"",
    )


async def _final_payment(
    pool: asyncpg.Pool, submitter: DirectSubmitter, merchant_id: uuid.UUID, url: str
) -> uuid.UUID:
    """A succeeded payment with a webhook URL (its outbox jobs are not relayed here)."""
    payment_id = await submitter.submit_payment(merchant_id, "3.00", "USD", "k-lease", url)
    await pool.execute(
        "UPDATE payments SET status = 'succeeded', processed_at = now() WHERE id = $1",
        payment_id,
    )
    return payment_id


async def test_a_live_lease_keeps_other_sends_and_the_dead_letter_away(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
) -> None:
    payment_id = await _final_payment(owner_pool, submitter, merchant[0], sink.url)
    # Another send holds the lease (as if it were POSTing right now).
    await owner_pool.execute(
        "UPDATE payments SET webhook_lease_token = 'other', "
        "webhook_lease_until = clock_timestamp() + interval '1 minute' WHERE id = $1",
        payment_id,
    )
    client = build_http_client(pipe_settings)
    try:
        sender = WebhookSender(
            pool,
            pipe_settings,
            client,
            database=pipe_settings,
            pipeline=pipe_settings,
            broker=pipe_settings,
        )
        # A duplicate of the in-flight job is acked and dropped: no POST, no retry, and
        # it never dead-letters the job the lease holder is delivering.
        await sender.handle(_envelope(payment_id))
        async with pool.acquire() as conn, transaction(conn, pipe_settings):
            dead = await dead_letter_webhook(
                conn, {"payment_id": str(payment_id)}, "x", 4, message_id="m-other"
            )
            assert dead is None
            assert await dead_letter_webhook(conn, {"payment_id": str(payment_id)}, "x", 4) is None
        assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0
        assert sink.received == []
        row = await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id)
        assert (row["webhook_attempts"], row["webhook_dead_at"]) == (0, None)

        # The other send died: its lease runs out and the next send takes over.
        await owner_pool.execute(
            "UPDATE payments SET webhook_lease_until = clock_timestamp() - interval '1 second'"
            " WHERE id = $1",
            payment_id,
        )
        await sender.handle(_envelope(payment_id))
    finally:
        await client.aclose()
    row = await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id)
    assert row["webhook_attempts"] == 1
    assert row["webhook_delivered_at"] is not None
    assert (row["webhook_lease_token"], row["webhook_lease_until"]) == (None, None)
    assert len(sink.received) == 1
    # Delivered: dead-lettering it now records nothing (delivered or dead, never both).
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        assert await dead_letter_webhook(conn, {"payment_id": str(payment_id)}, "x", 4) is None
    assert (
        await pool.fetchval("SELECT webhook_dead_at FROM payments WHERE id = $1", payment_id)
        is None
    )


async def _sample_idle_in_transaction(
    owner_pool: asyncpg.Pool,
    database: str,
    app_role: str,
    stop: asyncio.Event,
    seen: list[tuple[int, int]],
) -> None:
    """(sessions idle in transaction, of those idle in transaction for over SLOW_S / 2)."""
    while not stop.is_set():
        row = await owner_pool.fetchrow(
            "SELECT count(*) AS idle, count(*) FILTER (WHERE clock_timestamp() - state_change"
            " > make_interval(secs => $3)) AS long_idle FROM pg_stat_activity"
            " WHERE datname = $1 AND usename = $2 AND state = 'idle in transaction'",
            database,
            app_role,
            SLOW_S / 2,
        )
        seen.append((row["idle"], row["long_idle"]))
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_500_slow_merchants_wait_on_http_not_on_postgresql(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    merchant: tuple[uuid.UUID, str],
    start_roles,
) -> None:
    """One worker, a DB pool of 10, a receiver (its own process) answering after 2 s."""
    receiver = SinkProcess(SLOW_S)
    settings = pipe_settings.model_copy(
        update={"db_pool_max": POOL, "webhook_timeout_s": 10.0, "broker_prefetch": 16}
    )
    try:
        # 500 final payments, each with its webhook job in the outbox (what finalize
        # commits); the relay publishes them, then one worker consumes only webhooks.
        async with owner_pool.acquire() as conn:
            ids = await conn.fetch(
                "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, status,"
                " processed_at, webhook_url) SELECT $1, 1.00, 'USD', 'k-slow-' || i,"
                " 'succeeded', now(), $2 FROM generate_series(1, $3) i RETURNING id",
                merchant[0],
                receiver.url,
                WEBHOOKS,
            )
        async with pool.acquire() as conn, transaction(conn, settings):
            for row in ids:
                job = {"version": 1, "payment_id": str(row["id"])}
                await enqueue(conn, TOPIC_WEBHOOK_DELIVER, job)
        relay = await start_roles(("relay",), settings=settings)
        await wait_until(
            lambda: pool.fetchval(
                "SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL",
            ),
            limit_s=60,
            what="every webhook job published",
        )
        await relay.stop()  # only the worker's sessions are sampled below

        database = await pool.fetchval("SELECT current_database()")
        app_role = await pool.fetchval("SELECT current_user")
        stop = asyncio.Event()
        seen: list[tuple[int, int]] = []
        sampler = asyncio.create_task(
            _sample_idle_in_transaction(owner_pool, database, app_role, stop, seen)
        )
        started = time.monotonic()
        running = await start_roles(("worker",), settings=settings, worker_queues=("webhooks",))
        try:
            await wait_until(
                lambda: pool.fetchval(
                    "SELECT count(*) = $1 FROM payments WHERE webhook_delivered_at IS NOT NULL",
                    WEBHOOKS,
                ),
                limit_s=120,
                what="every webhook delivered",
            )
            elapsed = time.monotonic() - started
        finally:
            stop.set()
            await sampler
            await running.stop()
    finally:
        stats = receiver.stop()
    idle = max(n for n, _ in seen)
    long_idle = max(n for _, n in seen)
    print(
        f"\n{WEBHOOKS} webhooks, receiver delay {SLOW_S} s, DB pool {POOL}: delivered in "
        f"{elapsed:.1f} s; {stats.peak_in_flight} POSTs held by the receiver at once at most; "
        f"{stats.answered} POSTs; sessions idle in transaction at most {idle}, of them idle "
        f"over {SLOW_S / 2} s at most {long_idle} ({len(seen)} samples)"
    )
    rows = await pool.fetch(
        "SELECT webhook_attempts, webhook_delivered_at, webhook_lease_token, webhook_dead_at"
        " FROM payments"
    )
    assert len(rows) == WEBHOOKS
    assert all(r["webhook_delivered_at"] is not None for r in rows)
    assert all(r["webhook_dead_at"] is None and r["webhook_lease_token"] is None for r in rows)
    # Every POST the receiver answered was counted once, and each payment's webhook-id
    # reached it (a POST that timed out on a loaded machine is retried, and counted).
    assert sum(r["webhook_attempts"] for r in rows) == stats.answered
    assert stats.distinct_ids == WEBHOOKS
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0
    assert seen and idle <= POOL
    # More merchants were waited on at once than the pool has connections: the POSTs
    # wait on HTTP, not on PostgreSQL.
    assert stats.peak_in_flight > POOL
