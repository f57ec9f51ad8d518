"""Fixtures for the Redis DLQ fallback: a per-test Redis key prefix on the real Redis, a
pool and a Redis client on closed ports (the store is unreachable), helpers that make
real subjects to dead-letter."""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.alerts import Severity
from payflow.api.auth import create_merchant
from payflow.broker.messages import Envelope
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.records import EventType
from payflow.ledger.states import EventStatus, transition
from payflow_lab.bench.submit import DirectSubmitter


def closed_port() -> int:
    """A local TCP port nothing listens on (bound once by us, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    client = Redis.from_url(settings.redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def make_settings(settings: Settings) -> Callable[..., Settings]:
    """The test's settings with its own Redis key prefix, plus overrides."""
    prefix = f"payflow-test-dlq-{uuid.uuid4().hex[:12]}:"

    def make(**overrides: object) -> Settings:
        return settings.model_copy(update={"redis_key_prefix": prefix, **overrides})

    return make


@pytest.fixture
async def fb_settings(
    make_settings: Callable[..., Settings], redis: Redis
) -> AsyncIterator[Settings]:
    """Settings with a per-test key prefix; every key under it is deleted afterwards."""
    settings = make_settings()
    yield settings
    async for key in redis.scan_iter(match=settings.redis_key_prefix + "*"):
        await redis.delete(key)


@pytest.fixture
async def dead_pool() -> AsyncIterator[asyncpg.Pool]:
    """A real asyncpg pool whose DSN points at a closed port: PostgreSQL unreachable."""
    pool = await asyncpg.create_pool(
        f"postgresql://postgres@127.0.0.1:{closed_port()}/payflow", min_size=0, max_size=1
    )
    assert pool is not None
    yield pool
    await pool.close()


@pytest.fixture
async def dead_redis() -> AsyncIterator[Redis]:
    """A Redis client on a closed port: Redis unreachable too."""
    client = Redis.from_url(f"redis://127.0.0.1:{closed_port()}/0", socket_connect_timeout=1)
    yield client
    await client.aclose()


def envelope(
    payload: Mapping[str, Any], *, attempt: int = 4, trace_id: str = "trace-dlq"
) -> Envelope:
    """A decoded delivery as the consumer hands it to `on_dead`."""
    return Envelope(
        message_id=uuid.uuid4().hex,
        routing_key="test",
        payload=dict(payload),
        trace_id=trace_id,
        attempt=attempt,
        body=b"{}",
    )


async def enqueued_event(pool: asyncpg.Pool, settings: Settings) -> str:
    """A deposit event moved to enqueued (published, not posted); returns its id."""
    event_id = f"dep-{uuid.uuid4().hex[:12]}"
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
    return event_id


async def pending_payment(pool: asyncpg.Pool, settings: Settings) -> uuid.UUID:
    """A pending payment (no charge attempt yet) with a webhook URL; returns its id."""
    async with pool.acquire() as conn:
        merchant_id, _key, _secret = await create_merchant(conn, "shop", admin=False)
    return await DirectSubmitter(pool, settings).submit_payment(
        merchant_id, "8.00", "USD", f"k-{uuid.uuid4().hex}", "https://merchant.example/hook"
    )


class RecordingAlerts:
    """An alert sink that remembers what it was told (the drain's alerts are asserted)."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, Severity, str]] = []
        self.resolved: list[str] = []

    async def fire(
        self,
        key: str,
        severity: Severity,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.fired.append((key, severity, message))

    async def resolve(self, key: str) -> None:
        self.resolved.append(key)


class NoGateway:
    """The payment hook must not reach the gateway while PostgreSQL is down."""

    async def charge(self, request: object) -> object:
        raise AssertionError("no charge may happen in on_dead")

    async def status(self, payment_id: uuid.UUID) -> object:
        raise AssertionError("PostgreSQL was down: the hook never got to ask")
