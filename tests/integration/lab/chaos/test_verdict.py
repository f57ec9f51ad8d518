"""The chaos verdict fails when the database disagrees with the load's model: a payment
answered 2xx that never existed, a deposit never credited, a balance off the model (and
so off the ledger, which recon reports), a dead letter no fault explains."""

from __future__ import annotations

import os
import uuid
from decimal import Decimal

import asyncpg
from redis.asyncio import Redis

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.payments.gateway import EmulatedGateway
from payflow_lab.chaos.load import Op, Plan
from payflow_lab.chaos.verdict import judge


async def test_verdict_counts_what_the_database_contradicts(
    settings: Settings, owner_pool: asyncpg.Pool
) -> None:
    async with owner_pool.acquire() as conn:
        merchant_id, _key, _secret = await create_merchant(conn, "verdict", admin=False)
        account_id = await conn.fetchval(
            "INSERT INTO accounts (merchant_id, asset) VALUES ($1, 'USDC') RETURNING id",
            merchant_id,
        )
        await conn.execute("UPDATE accounts SET balance = 5 WHERE id = $1", account_id)
        await conn.execute(
            "INSERT INTO dead_letter_queue (source, subject_id, error, attempt)"
            " VALUES ('payment', 'x', 'boom', 1)"
        )
    missing_payment = Op("payment", "k-1", Decimal("1.00"), mode="ok")
    missing_payment.result = {"payment_id": str(uuid.uuid4())}
    uncredited = Op("deposit", "d-1", Decimal("2"), account=0)
    uncredited.result = {"events": [{"result": "recorded"}]}
    uncredited.tx_hash = "0x" + "ab" * 32  # reported, never credited on chain
    unanswered = Op("withdrawal", "w-1", Decimal("1"), account=0)
    plan = Plan([missing_payment, uncredited, unanswered], [0, 1, 2])
    redis = Redis.from_url(settings.redis_url)
    try:
        gateway = EmulatedGateway(redis, settings.redis_key_prefix, 0, 0, 0.1, seed=1)
        env = {
            **os.environ,
            "DATABASE_URL": settings.database_url,
            "MIGRATION_DATABASE_URL": settings.migration_url(),
            "DB_OWNER_ROLE": settings.db_owner_role,
        }
        verdict = await judge(
            settings.database_url, redis, plan, [account_id], "USD", gateway, [], env
        )
    finally:
        await redis.aclose()

    assert verdict.lost == 3  # the payment, the deposit, the unanswered withdrawal
    assert verdict.duplicated == 0
    assert verdict.balance_mismatches == 1
    assert verdict.dlq_unexplained == 1
    assert verdict.recon_clean is False
    assert verdict.exactly_once is False
