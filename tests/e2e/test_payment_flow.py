"""A payment and a deposit flow end to end on the real PostgreSQL and RabbitMQ."""

from __future__ import annotations

import uuid
from decimal import Decimal

import asyncpg
import orjson

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account
from payflow.ledger.recon import reconcile
from payflow.payments.finalize import credit_event_id
from payflow.webhooks.sender import webhook_id
from payflow.webhooks.signing import verify
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import wait_until


async def test_payment_reaches_terminal_and_one_signed_webhook_verifies(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    merchant_id, secret = merchant
    running = await start_roles(("relay", "worker", "scheduler"))
    payment_id = await submitter.submit_payment(merchant_id, "10.50", "RUB", "order-1", sink.url)

    async def delivered() -> object:
        return await pool.fetchrow(
            "SELECT status, processed_at, webhook_attempts, webhook_delivered_at FROM payments "
            "WHERE id = $1 AND webhook_delivered_at IS NOT NULL",
            payment_id,
        )

    row = await wait_until(delivered, what="webhook delivered")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = $1",
            credit_event_id(payment_id),
        ),
        what="merchant credit confirmed",
    )
    await running.stop()

    assert row["status"] == "succeeded"
    assert row["processed_at"] is not None
    assert row["webhook_attempts"] == 1
    assert len(sink.received) == 1
    request = sink.received[0]
    assert request.headers["webhook-id"] == webhook_id(payment_id)
    assert verify(
        secret,
        request.headers["webhook-id"],
        int(request.headers["webhook-timestamp"]),
        request.body,
        request.headers["webhook-signature"],
    )
    assert orjson.loads(request.body) == {
        "payment_id": str(payment_id),
        "status": "succeeded",
        "amount": "10.50",
        "currency": "RUB",
    }
    balance = await pool.fetchval(
        "SELECT balance FROM accounts WHERE merchant_id = $1 AND asset = 'RUB'", merchant_id
    )
    assert balance == Decimal("10.50")
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0
    assert (await reconcile(pool, pipe_settings, full=True)).clean


async def test_deposit_is_posted_once(
    pool: asyncpg.Pool, pipe_settings: Settings, submitter: DirectSubmitter, start_roles
) -> None:
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USDC", Decimal(0))
    running = await start_roles()
    await submitter.submit_deposit("dep-1", account.id, "25.000001")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = 'dep-1'"
        ),
        what="deposit confirmed",
    )
    await running.stop()
    balance = await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id)
    assert balance == Decimal("25.000001")
