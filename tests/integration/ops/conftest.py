"""Ops fixtures: a recording alert sink and a job context on the test's database."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.jobs.spec import JobContext
from tests.processes import run_payflow
from tests.recording_alerts import RecordingSink


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    """The real Redis, for jobs that use it (the DLQ drain); keys under a per-test prefix
    (`ops_redis_prefix`), deleted afterwards."""
    client = Redis.from_url(settings.redis_url)
    yield client
    keys = [key async for key in client.scan_iter(match=f"{OPS_REDIS_PREFIX}*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


OPS_REDIS_PREFIX = f"payflow-test-ops-{uuid.uuid4().hex[:8]}:"


@pytest.fixture
def ctx(pool: asyncpg.Pool, settings: Settings, sink: RecordingSink, redis: Redis) -> JobContext:
    ops = settings.model_copy(update={"redis_key_prefix": OPS_REDIS_PREFIX})
    return JobContext(pool, ops, sink, redis)


@pytest.fixture
def ops_settings(settings: Settings, vhost: str) -> Settings:
    """The test's database and its own RabbitMQ vhost."""
    return settings.model_copy(
        update={"rabbitmq_url": f"amqp://guest:guest@127.0.0.1:5672/{quote(vhost, safe='')}"}
    )


def cli_env(settings: Settings) -> dict[str, str]:
    """The environment a `payflow` subprocess needs to see the test's services."""
    return {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "MIGRATION_DATABASE_URL": settings.migration_url(),
        "DB_OWNER_ROLE": settings.db_owner_role,
        "RABBITMQ_URL": settings.rabbitmq_url,
        "LOG_LEVEL": "WARNING",
        "COLUMNS": "200",  # rich tables: one line per row
    }


def payflow_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `payflow ARGS` against the test's services."""
    return run_payflow(args, cli_env(settings), timeout=120)
