"""Fixtures of the charge-claim tests: settings, and emulators sharing the emulated
gateway's memory (real Redis under the key prefix of `tests/integration/conftest.py`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from redis.asyncio import Redis

from payflow.config import Settings, load_settings
from payflow.payments.gateway import EmulatedGateway


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
