"""A benchmark removes what it made on the shared broker and Redis: every queue and
exchange of its prefix (from the topology's own names, so a new work queue is covered)
and its Redis keys. Real RabbitMQ (this test's vhost) and real Redis."""

from __future__ import annotations

import uuid

import aio_pika
import aiormq
import pytest
from redis.asyncio import Redis

from payflow.broker.topology import FEED_QUEUES, WORK_QUEUES, declare_topology, declared_names
from payflow.config import Settings
from payflow_lab.bench.services import cleanup_broker, cleanup_redis


async def _exists(settings: Settings, queue: str) -> bool:
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        try:
            await channel.declare_queue(queue, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return False
        return True
    finally:
        await connection.close()


async def test_cleanup_broker_deletes_every_queue_and_exchange_of_the_prefix(
    pipe_settings: Settings,
) -> None:
    prefix = f"bench_{uuid.uuid4().hex[:8]}"
    settings = pipe_settings.model_copy(update={"broker_prefix": prefix})
    queues, exchanges = declared_names(settings)
    # Each work queue (and notification feed), its parking queue and one per retry tier.
    assert len(queues) == len(WORK_QUEUES + FEED_QUEUES) * (2 + len(settings.retry_tiers_ms))
    feeds = [q for q in queues if q.split(".")[1] in {wq.name for wq in FEED_QUEUES}]
    assert any(q.endswith(".payout_notifications") for q in feeds)
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        await declare_topology(channel, settings)
        for queue in feeds:  # left by an earlier version, which declared the feeds
            await channel.declare_queue(queue, durable=True)
    finally:
        await connection.close()
    assert [await _exists(settings, q) for q in queues] == [True] * len(queues)
    await cleanup_broker(pipe_settings, prefix)
    assert [await _exists(settings, q) for q in queues] == [False] * len(queues)
    connection = await aio_pika.connect(settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        for exchange in exchanges:
            with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
                await channel.declare_exchange(exchange, passive=True)
            channel = await connection.channel()
    finally:
        await connection.close()


async def test_cleanup_redis_deletes_only_the_bench_prefix(pipe_settings: Settings) -> None:
    prefix = f"payflow-bench_{uuid.uuid4().hex[:8]}:"
    other = f"payflow-test-{uuid.uuid4().hex[:8]}:keep"
    redis = Redis.from_url(pipe_settings.redis_url)
    try:
        for i in range(2500):
            await redis.set(f"{prefix}charge:{i}", "1", ex=600)
        await redis.set(other, "1", ex=600)
        assert await cleanup_redis(pipe_settings, prefix) == 2500
        assert [key async for key in redis.scan_iter(match=f"{prefix}*")] == []
        assert await redis.get(other) == b"1"
    finally:
        await redis.delete(other)
        await redis.aclose()
