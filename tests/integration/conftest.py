"""Integration fixtures shared by every package's tests: a RabbitMQ vhost per test, pipeline
settings on it, a webhook sink, a merchant, roles running in the event loop, Redis."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from urllib.parse import quote

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.api.auth import create_merchant
from payflow.config import Settings, load_settings
from payflow.payments.gateway import Gateway
from payflow.roles import WORKER_QUEUES, run_roles
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.conftest import OWNER_ROLE, REDIS_PREFIX
from tests.integration.support import (
    RABBIT_USER,
    START_LIMIT_S,
    Running,
    consumers,
    rabbitmqctl,
    wait_until,
)


@pytest.fixture
def vhost() -> Iterator[str]:
    """A fresh RabbitMQ vhost for one test, deleted afterwards."""
    name = f"payflow_test_{uuid.uuid4().hex[:12]}"
    rabbitmqctl("add_vhost", name)
    rabbitmqctl("set_permissions", "-p", name, RABBIT_USER, ".*", ".*", ".*")
    yield name
    rabbitmqctl("delete_vhost", name)


@pytest.fixture
def pipe_settings(database_url: str, migration_url: str, vhost: str) -> Settings:
    """Fast tiers and an instant, always-approving gateway; the sink on 127.0.0.1 is allowed.
    The service logs in as the run's app role (`database_url`); the gateway emulator
    remembers charges in Redis under this test's own key prefix."""
    return load_settings(
        database_url=database_url,
        migration_database_url=migration_url,
        db_owner_role=OWNER_ROLE,
        redis_key_prefix=f"{REDIS_PREFIX}-{vhost}:",
        rabbitmq_url=f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}",
        retry_tiers_ms=(40, 80, 120),
        charge_lease_s=0.1,  # shorter than the tiers: a dead worker's claim is taken over
        gateway_delay_min_s=0.0,
        gateway_delay_max_s=0.0,
        gateway_failure_rate=0.0,
        webhook_allow_hosts=("127.0.0.1",),
        webhook_timeout_s=2.0,
        relay_poll_interval_s=0.5,
        broker_prefetch=16,
        db_pool_min=1,
        db_pool_max=8,
        scheduler_interval_s=0.2,
        shutdown_grace_s=10.0,
        log_json=False,
    )


@pytest.fixture
async def sink() -> AsyncIterator[WebhookSink]:
    server = WebhookSink()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def submitter(pool: asyncpg.Pool, pipe_settings: Settings) -> DirectSubmitter:
    return DirectSubmitter(pool, pipe_settings)


@pytest.fixture
async def merchant(pool: asyncpg.Pool) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn:
        merchant_id, _api_key, webhook_secret = await create_merchant(conn, "shop", admin=False)
    return merchant_id, webhook_secret


@pytest.fixture
async def start_roles(
    pipe_settings: Settings,
) -> AsyncIterator[Callable[..., Awaitable[Running]]]:
    started: list[Running] = []

    async def start(
        roles: tuple[str, ...] = ("relay", "worker"),
        *,
        settings: Settings | None = None,
        gateway: Gateway | None = None,
        worker_queues: tuple[str, ...] = WORKER_QUEUES,
    ) -> Running:
        stop_event = asyncio.Event()
        task = asyncio.create_task(
            run_roles(
                settings or pipe_settings,
                roles,
                stop_event,
                gateway=gateway,  # None: the emulator from settings, on real Redis
                worker_queues=worker_queues,
            )
        )
        running = Running(task, stop_event)
        started.append(running)
        chosen = settings or pipe_settings
        if "worker" in roles:
            # Consuming means the topology is declared: a message published from now on
            # is routed, not dropped (a fixed pause lost that race on a loaded machine).
            for queue in worker_queues:

                async def consuming(queue: str = queue) -> bool:
                    if task.done():
                        task.result()
                    return await consumers(chosen, f"{chosen.broker_prefix}.{queue}") > 0

                await wait_until(consuming, limit_s=START_LIMIT_S, what=f"a consumer on {queue}")
        else:
            await asyncio.sleep(0.3)  # let the topology be declared
        if task.done():
            task.result()
        return running

    yield start
    for running in started:
        with contextlib.suppress(Exception):
            await running.stop()


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
