"""The gateway against its record, on real Redis and PostgreSQL: the emulator lists the
charges it settled on a day, and `recon --gateway --date` matches them with the books'
gateway legs: clean after real payments, then one missing, one extra, one different."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.payments.finalize import merchant_account
from payflow.payments.gateway import ChargeRequest, EmulatedGateway
from payflow.payments.gateway_recon import reconcile_gateway
from payflow.payments.gateway_recon_cli import run_gateway_recon
from payflow.payments.processor import PaymentProcessor
from payflow.roles import default_gateway
from payflow_lab.bench.submit import DirectSubmitter
from tests.conftest import redis_prefix
from tests.integration.payments.charges.workers import payment_created


@pytest.fixture
def gw_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "redis_key_prefix": redis_prefix("gwrecon"),
            "gateway_failure_rate": 0.0,
            "gateway_delay_min_s": 0.0,
            "gateway_delay_max_s": 0.0,
        }
    )


@pytest.fixture
async def gw_redis(gw_settings: Settings) -> AsyncIterator[Redis]:
    client = Redis.from_url(gw_settings.redis_url)
    yield client
    keys = [k async for k in client.scan_iter(match=gw_settings.redis_key_prefix + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def _paid(
    pool: asyncpg.Pool,
    settings: Settings,
    processor: PaymentProcessor,
    merchant: uuid.UUID,
    amount: str,
) -> uuid.UUID:
    payment_id = await DirectSubmitter(pool, settings).submit_payment(
        merchant, amount, "USD", uuid.uuid4().hex, "https://example.com/hook"
    )
    await processor.handle(payment_created(payment_id))
    status = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    assert status == "succeeded"
    return payment_id


async def test_settled_charges_match_the_books_then_each_finding_shows(
    pool: asyncpg.Pool, gw_settings: Settings, gw_redis: Redis
) -> None:
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)
        async with transaction(conn, gw_settings):
            await merchant_account(conn, merchant, "USD")
    gateway = default_gateway(gw_settings, gw_redis, redis_settings=gw_settings)
    assert isinstance(gateway, EmulatedGateway)
    processor = PaymentProcessor(pool, gw_settings, gateway, database=gw_settings)
    paid = [await _paid(pool, gw_settings, processor, merchant, a) for a in ("7.50", "3", "1.25")]
    today = datetime.now(UTC).date()

    settled = await gateway.settled(today)
    assert {c.payment_id for c in settled} == set(paid)
    assert {c.amount for c in settled} == {Decimal("7.50"), Decimal(3), Decimal("1.25")}
    clean = await reconcile_gateway(pool, gateway, today)
    assert clean.clean and (clean.settled, clean.booked) == (3, 3), clean.summary()
    assert (
        await run_gateway_recon(
            gw_settings.database,
            today,
            redis_settings=gw_settings.redis,
            emulator=gw_settings.emulator,
        )
        is True
    )
    assert (await reconcile_gateway(pool, gateway, today - timedelta(days=1))).clean

    # missing: the gateway settled a charge payflow never booked
    lost = uuid.uuid4()
    await gateway.charge(ChargeRequest(lost, Decimal("5"), "USD"))
    # extra: the gateway's record of the day lacks a booked payment
    day_key = f"{gw_settings.redis_key_prefix}gateway:settled:{today.isoformat()}"
    await gw_redis.hdel(day_key, str(paid[1]))
    # different: the gateway settled another amount than the books hold
    await gw_redis.hset(day_key, str(paid[2]), "1.20 USD emu_x")

    report = await reconcile_gateway(pool, gateway, today)
    assert report.missing == [f"{lost} 5 USD"]
    assert report.extra == [f"{paid[1]} 3 USD"]
    assert report.different == [f"{paid[2]} gateway 1.2 USD books 1.25 USD"]
    assert not report.clean and "result=DIRTY" in report.summary()
    assert (
        await run_gateway_recon(
            gw_settings.database,
            today,
            redis_settings=gw_settings.redis,
            emulator=gw_settings.emulator,
        )
        is False
    )  # the command exits 1
