"""Through the real consumer on the real RabbitMQ: PostgreSQL down at dead-lettering ->
the entry is in Redis, the message parked and acked; PostgreSQL AND Redis down -> the
message is never acked: it comes back and stays in the broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from urllib.parse import quote

import asyncpg
import orjson
import pytest
from redis.asyncio import Redis

from payflow.broker.connection import confirm_channel, connect
from payflow.broker.consumer import Consumer, Route
from payflow.broker.messages import Envelope
from payflow.broker.publisher import publish
from payflow.broker.topology import TOPIC_LEDGER_EVENT, declare_topology
from payflow.config import Settings
from payflow.dlq.fallback import DlqFallback, FallbackEntry, fallback_key
from payflow.errors import BadInput
from payflow.ledger.worker import LedgerWorker
from tests.integration.support import queue_depth, rabbitmqctl, wait_until


@pytest.fixture
def broker_vhost() -> Iterator[str]:
    """A fresh RabbitMQ vhost for one test, deleted afterwards."""
    name = f"payflow_test_{uuid.uuid4().hex[:12]}"
    rabbitmqctl("add_vhost", name)
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    yield name
    rabbitmqctl("delete_vhost", name)


@pytest.fixture
def broker_settings(
    make_settings: Callable[..., Settings], fb_settings: Settings, broker_vhost: str
) -> Settings:
    return make_settings(
        rabbitmq_url=f"amqp://guest:guest@127.0.0.1:5672/{quote(broker_vhost, safe='')}"
    )


Starter = Callable[["PoisonHandler", LedgerWorker, str], Awaitable[None]]


class PoisonHandler:
    """A handler whose message can never succeed (BadInput: dead-letters at once)."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, envelope: Envelope) -> None:
        self.calls += 1
        raise BadInput("poison")


@pytest.fixture
async def run_consumer(broker_settings: Settings) -> AsyncIterator[Starter]:
    consumers: list[Consumer] = []
    connection = await connect(broker_settings, name="dlq-fallback-test")
    channel = await connection.channel()
    names = await declare_topology(channel, broker_settings)
    await channel.close()

    async def start(handler: PoisonHandler, worker: LedgerWorker, event_id: str) -> None:
        consumer = Consumer(
            connection, broker_settings, names, [Route("ledger", handler, worker.on_dead)]
        )
        await consumer.start()
        consumers.append(consumer)
        publishing = await confirm_channel(connection)
        exchange = await publishing.get_exchange(names.exchange)
        body = orjson.dumps({"version": 1, "event_id": event_id})
        await publish(
            exchange, TOPIC_LEDGER_EVENT, body, message_id=uuid.uuid4().hex, trace_id="t-c"
        )
        await publishing.close()

    yield start
    for consumer in consumers:
        await consumer.stop(5.0)
    await connection.close()


async def test_postgres_down_parks_in_redis_and_acks(
    broker_settings: Settings,
    dead_pool: asyncpg.Pool,
    redis: Redis,
    run_consumer: Starter,
) -> None:
    handler = PoisonHandler()
    worker = LedgerWorker(
        dead_pool,
        broker_settings,
        DlqFallback(redis, broker_settings, redis_settings=broker_settings),
    )

    await run_consumer(handler, worker, "ev-poison")

    raw = await wait_until(
        lambda: redis.lindex(fallback_key(broker_settings), 0), what="fallback entry"
    )
    assert FallbackEntry.from_json(raw).subject_id == "ev-poison"
    await wait_until(
        lambda: _positive(queue_depth(broker_settings, "payflow.ledger.dlq")), what="parked"
    )
    await asyncio.sleep(0.3)
    assert handler.calls == 1  # acked: never redelivered
    assert await queue_depth(broker_settings, "payflow.ledger") == 0


async def test_both_stores_down_the_message_stays_in_the_broker(
    broker_settings: Settings,
    dead_pool: asyncpg.Pool,
    dead_redis: Redis,
    redis: Redis,
    run_consumer: Starter,
) -> None:
    handler = PoisonHandler()
    worker = LedgerWorker(
        dead_pool,
        broker_settings,
        DlqFallback(dead_redis, broker_settings, redis_settings=broker_settings),
    )

    await run_consumer(handler, worker, "ev-stuck")

    await wait_until(lambda: _true(handler.calls >= 2), what="a redelivery")
    assert await redis.llen(fallback_key(broker_settings)) == 0
    assert await queue_depth(broker_settings, "payflow.ledger.dlq") == 0


async def _positive(depth: Awaitable[int]) -> int | None:
    value = await depth
    return value if value else None


async def _true(value: bool) -> bool | None:
    return True if value else None
