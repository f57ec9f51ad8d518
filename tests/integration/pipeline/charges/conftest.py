"""Fixtures of the charge-claim tests: real Redis (the emulated gateway's memory) under
a key prefix per test, settings, and emulators sharing that memory."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from payflow.config import Settings, load_settings
from payflow.payments.gateway import EmulatedGateway


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(load_settings().redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def key_prefix(redis: Redis) -> AsyncIterator[str]:
    """A Redis key prefix of this test alone; its keys are deleted afterwards."""
    prefix = f"payflow-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    async for key in redis.scan_iter(match=prefix + "*"):
        await redis.delete(key)


@pytest.fixture
def charge_settings(database_url: str, key_prefix: str) -> Settings:
    return load_settings(
        database_url=database_url,
        redis_key_prefix=key_prefix,
        gateway_delay_min_s=0.0,
        gateway_delay_max_s=0.0,
        gateway_failure_rate=0.0,
        charge_lease_s=30.0,
        lock_timeout_ms=5000,
    )


@pytest.fixture
def emulator(redis: Redis, key_prefix: str) -> Callable[..., EmulatedGateway]:
    """Emulators sharing this test's Redis memory (like workers sharing one gateway)."""

    def build(failure_rate: float = 0.0, seed: int | None = None) -> EmulatedGateway:
        return EmulatedGateway(redis, key_prefix, 0.0, 0.0, failure_rate, seed)

    return build
