"""The pipeline through pgbouncer in transaction pooling: the relay (LISTEN on the
direct URL, or the fallback poll when there is none), a payment from the HTTP API to
the merchant's webhook, and recovery and sweeps (by hand and by the scheduler)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import aio_pika
import asyncpg
import httpx
import orjson

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType
from payflow.ledger.recovery import recover_stale_events
from payflow.ledger.states import EventStatus, transition
from payflow.payments.sweeps import sweep_pending_payments
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import wait_until

LEDGER_QUEUE = "payflow.ledger"


async def _ledger_messages(settings: Settings) -> list[dict[str, Any]]:
    """Take every message waiting in the ledger work queue (nothing consumes it here)."""
    connection = await aio_pika.connect(settings.rabbitmq_url)
    bodies: list[dict[str, Any]] = []
    try:
        channel = await connection.channel()
        queue = await channel.get_queue(LEDGER_QUEUE)
        while (message := await queue.get(fail=False)) is not None:
            bodies.append(orjson.loads(message.body))
            await message.ack()
    finally:
        await connection.close()
    return bodies


async def _account(pool: asyncpg.Pool, settings: Settings) -> uuid.UUID:
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USD", Decimal(0))
    return account.id


async def _listening(owner_pool: asyncpg.Pool) -> bool:
    """True once a backend of this database sits in LISTEN (the relay's listener)."""
    return bool(
        await owner_pool.fetchval(
            "SELECT count(*) > 0 FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
        )
    )


async def test_relay_listens_on_the_direct_url_and_wakes_on_notify(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    start_roles,
) -> None:
    """DATABASE_URL through pgbouncer, DATABASE_DIRECT_URL to PostgreSQL: a deposit is
    published long before the (two-minute) fallback poll could have found it."""
    settings = pipe_settings.model_copy(update={"relay_poll_interval_s": 120.0})
    assert settings.direct_url() != settings.database_url
    await start_roles(("relay",), settings=settings)
    await wait_until(lambda: _listening(owner_pool), what="the relay listening")
    account = await _account(pool, settings)
    for index in range(3):
        await submitter.submit_deposit(f"listen-{index}", account, "1.25")

    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 3 FROM outbox WHERE published_at IS NOT NULL"),
        limit_s=60,
        what="deposits published on NOTIFY",
    )
    assert await pool.fetchval("SELECT count(*) FROM payment_events WHERE status = 'enqueued'") == 3
    messages = await _ledger_messages(settings)
    assert sorted(m["event_id"] for m in messages) == ["listen-0", "listen-1", "listen-2"]


async def test_relay_without_a_direct_url_still_publishes_by_polling(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    start_roles,
) -> None:
    """No DATABASE_DIRECT_URL: the LISTEN goes through pgbouncer, whose transaction
    pooling drops notifications, and the fallback poll publishes every row once."""
    settings = pipe_settings.model_copy(
        update={"database_direct_url": None, "relay_poll_interval_s": 0.5}
    )
    assert settings.direct_url() == settings.database_url  # pgbouncer
    await start_roles(("relay",), settings=settings)
    account = await _account(pool, settings)
    for index in range(5):
        await submitter.submit_deposit(f"poll-{index}", account, "2.00")

    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 5 FROM outbox WHERE published_at IS NOT NULL"),
        what="deposits published by the poll",
    )
    messages = await _ledger_messages(settings)
    assert sorted(m["event_id"] for m in messages) == [f"poll-{i}" for i in range(5)]


async def test_payment_from_the_api_to_the_merchant_webhook(
    app: Any,
    client: httpx.AsyncClient,
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    sink: WebhookSink,
    start_roles,
) -> None:
    """Created over HTTP, relayed, charged, credited and notified: every step's
    connections go through pgbouncer; each payment is credited and notified once."""
    await start_roles(("relay", "worker", "scheduler"))
    ids = []
    for index in range(5):
        reply = await client.post(
            "/api/v1/payments",
            json={"amount": f"{index + 1}.10", "currency": "USD", "webhook_url": sink.url},
            headers={"Idempotency-Key": f"bouncer-{index}"},
        )
        assert reply.status_code == 202, reply.text
        ids.append(reply.json()["payment_id"])

    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = 5 FROM payments "
            "WHERE status = 'succeeded' AND webhook_delivered_at IS NOT NULL"
        ),
        what="every payment succeeded and notified",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = 0 FROM payment_events WHERE status <> 'confirmed'"
        ),
        what="every credit posted",
    )
    merchant = await pool.fetchval("SELECT DISTINCT merchant_id FROM payments")
    credited = await pool.fetchval("SELECT balance FROM accounts WHERE merchant_id = $1", merchant)
    assert credited == Decimal("15.50")  # 1.10 + 2.10 + 3.10 + 4.10 + 5.10
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 5
    assert len(sink.received) == 5
    assert len({r.headers["webhook-id"] for r in sink.received}) == 5
    assert (await reconcile(pool, pipe_settings, full=True)).clean


async def _stale_enqueued_event(pool: asyncpg.Pool, settings: Settings, event_id: str) -> uuid.UUID:
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USD", Decimal(0))
        await record_event(
            conn,
            event_id=event_id,
            account_id=account.id,
            amount="7.00",
            event_type=EventType.DEPOSIT,
            scale=2,
        )
        await transition(conn, event_id, EventStatus.ENQUEUED)
        await conn.execute(
            "UPDATE payment_events SET updated_at = now() - interval '1 hour' WHERE event_id = $1",
            event_id,
        )
    return account.id


async def test_recovery_by_hand_reannounces_a_stale_event_once(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    account = await _stale_enqueued_event(pool, pipe_settings, "lost-1")
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 1
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 0
    row = await pool.fetchrow(
        "SELECT status, retry_count FROM payment_events WHERE event_id = 'lost-1'"
    )
    assert (row["status"], row["retry_count"]) == ("pending", 1)
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 1

    await start_roles(("relay", "worker"))
    await wait_until(
        lambda: pool.fetchval("SELECT balance = 7.00 FROM accounts WHERE id = $1", account),
        what="recovered event credited",
    )
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1


async def test_scheduler_recovers_and_sweeps_through_the_bouncer(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    """A stale event and a payment whose announcement the broker lost: the scheduler
    (transaction-scoped advisory locks through pgbouncer) re-announces both, and each
    is applied exactly once."""
    account = await _stale_enqueued_event(pool, pipe_settings, "lost-2")
    payment_id = await submitter.submit_payment(merchant[0], "25.50", "USD", "k-lost", sink.url)
    await owner_pool.execute("UPDATE payments SET created_at = now() - interval '1 day'")
    await owner_pool.execute(
        "UPDATE outbox SET published_at = now() WHERE topic = 'payment.created'"
    )  # confirmed by the broker, then lost in it
    assert (
        await sweep_pending_payments(pool, pipe_settings, database=pipe_settings)
    ).announced == 1
    await owner_pool.execute(
        "UPDATE outbox SET published_at = now() WHERE topic = 'payment.created'"
    )  # lost once more; only the scheduler's next sweep brings it back
    await owner_pool.execute("UPDATE payments SET payment_swept_at = now() - interval '1 day'")

    await start_roles(("relay", "worker", "scheduler"))
    await wait_until(
        lambda: pool.fetchval("SELECT balance = 7.00 FROM accounts WHERE id = $1", account),
        what="stale event recovered and credited",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="swept payment processed and notified",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT balance = 25.50 FROM accounts WHERE merchant_id = $1", merchant[0]
        ),
        what="merchant credited",
    )
    assert await pool.fetchval("SELECT payment_sweeps FROM payments") == 2
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 2
    assert len(sink.received) == 1
    assert (await reconcile(pool, pipe_settings, full=True)).clean
