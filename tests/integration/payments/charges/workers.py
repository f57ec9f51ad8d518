"""Functions run in separate OS processes (spawned) by the charge-claim tests."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import structlog
from redis.asyncio import Redis

from payflow.broker.messages import Envelope
from payflow.config import load_settings
from payflow.db.pool import create_pool
from payflow.payments.charges import ChargeInProgress
from payflow.payments.processor import PaymentProcessor
from payflow.roles import default_gateway


def payment_created(payment_id: UUID, attempt: int = 1) -> Envelope:
    """A `payment.created` delivery as the consumer hands it to the handler."""
    payload = {"version": 1, "payment_id": str(payment_id)}
    return Envelope(
        message_id="1",
        routing_key="payment.created",
        payload=payload,
        trace_id="trace-charges",
        attempt=attempt,
        body=b"",
    )


def handle_after_barrier(
    database_url: str, key_prefix: str, payment_id: str, delay_s: float, barrier: Any
) -> str:
    """Wait for every process, then handle one `payment.created` delivery with the
    Redis-backed emulator; return `finalized`, `duplicate` or `in_progress`."""

    async def run() -> str:
        settings = load_settings(
            database_url=database_url,
            redis_key_prefix=key_prefix,
            gateway_delay_min_s=delay_s,
            gateway_delay_max_s=delay_s,
            gateway_failure_rate=0.0,
            lock_timeout_ms=5000,
            charge_lease_s=30.0,
        )
        pool = await create_pool(settings, min_size=1, max_size=2)
        redis = Redis.from_url(settings.redis_url)
        try:
            processor = PaymentProcessor(
                pool,
                settings,
                default_gateway(settings, redis, redis_settings=settings),
                database=settings,
            )
            barrier.wait(timeout=60)
            with structlog.testing.capture_logs() as logs:
                try:
                    await processor.handle(payment_created(UUID(payment_id)))
                except ChargeInProgress:
                    return "in_progress"
            events = [entry["event"] for entry in logs]
            return "finalized" if "payflow.payments.finalized" in events else "duplicate"
        finally:
            await redis.aclose()
            await pool.close()

    return asyncio.run(run())


def handle_all_after_barrier(
    database_url: str, key_prefix: str, payment_ids: list[str], barrier: Any
) -> int:
    """Wait for every process, then handle a `payment.created` delivery of every payment
    in `payment_ids` at once (one task each, gateway without delay); return how many
    deliveries were handled (finalized, or found final), not counting those that met
    another process's live claim (the consumer would retry them later)."""

    async def run() -> int:
        settings = load_settings(
            database_url=database_url,
            redis_key_prefix=key_prefix,
            gateway_delay_min_s=0.0,
            gateway_delay_max_s=0.0,
            gateway_failure_rate=0.0,
            lock_timeout_ms=5000,
            charge_lease_s=30.0,
        )
        pool = await create_pool(settings, min_size=1, max_size=8)
        redis = Redis.from_url(settings.redis_url)
        try:
            processor = PaymentProcessor(
                pool,
                settings,
                default_gateway(settings, redis, redis_settings=settings),
                database=settings,
            )
            barrier.wait(timeout=60)

            async def one(payment_id: str) -> int:
                try:
                    await processor.handle(payment_created(UUID(payment_id)))
                except ChargeInProgress:
                    return 0
                return 1

            return sum(await asyncio.gather(*(one(p) for p in payment_ids)))
        finally:
            await redis.aclose()
            await pool.close()

    return asyncio.run(run())
