"""API fixtures: an app per test on its own database, a unique Redis key prefix,
and clients for the bootstrap merchant, a second merchant and the admin."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from payflow.api.auth import create_merchant
from payflow.app import create_app
from payflow.config import Settings, load_settings
from payflow.ingress.signature import sign
from tests.conftest import (
    OWNER_ROLE,
    REDIS_PREFIX,
    RUN_ID,
    _admin_execute,
    app_url,
    clone_database,
)

from .server import running_api

API_KEY = "test-api-key-0123456789"
ADMIN_KEY = "test-admin-key-0123456789"
PROVIDER_SECRET = "test-provider-secret-0123456789abcdef"


@pytest.fixture
def redis_prefix() -> str:
    return f"payflow-test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
async def redis_cleanup(redis_prefix: str) -> AsyncIterator[None]:
    """Delete only this test's keys afterwards."""
    yield
    redis = Redis.from_url("redis://127.0.0.1:6379/0")
    try:
        keys = [key async for key in redis.scan_iter(match=redis_prefix + "*")]
        if keys:
            await redis.delete(*keys)
    finally:
        await redis.aclose()


@pytest.fixture
def api_settings(
    database_url: str, migration_url: str, redis_prefix: str, redis_cleanup: None
) -> Settings:
    return load_settings(
        database_url=database_url,
        migration_database_url=migration_url,
        db_owner_role=OWNER_ROLE,
        api_key=API_KEY,
        admin_api_key=ADMIN_KEY,
        provider_webhook_secret=PROVIDER_SECRET,
        webhook_allow_hosts=("127.0.0.1", "localhost"),
        redis_key_prefix=redis_prefix,
        rate_limit_per_minute=100_000,
        db_pool_min=1,
        db_pool_max=5,
        log_json=False,
        log_level="WARNING",
    )


@pytest.fixture
async def app(api_settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(api_settings)
    async with app.router.lifespan_context(app):
        yield app


def _client(app: FastAPI, key: str | None) -> httpx.AsyncClient:
    headers = {"X-API-Key": key} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://payflow.test", headers=headers
    )


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app, API_KEY) as client:
        yield client


@pytest.fixture
async def anon(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app, None) as client:
        yield client


@pytest.fixture
async def admin(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app, ADMIN_KEY) as client:
        yield client


@pytest.fixture
async def other(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A second, independent merchant."""
    pool = app.state.api.pool
    async with pool.acquire() as conn:
        _, key, _ = await create_merchant(conn, "other-merchant", admin=False)
    async with _client(app, key) as client:
        yield client


def signed(body: bytes, secret: str = PROVIDER_SECRET) -> dict[str, str]:
    """Headers carrying a valid provider signature for `body`."""
    return {"X-Alchemy-Signature": sign(body, secret.encode()), "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def live_api(template_database: str) -> Iterator[str]:
    """One `payflow api` subprocess (one worker) and its own database for a whole test module."""
    name = f"payflow_test_{RUN_ID}_fuzz_{uuid.uuid4().hex[:6]}"
    asyncio.run(clone_database(template_database, name))
    settings = load_settings(
        database_url=app_url(name),
        api_key=API_KEY,
        admin_api_key=ADMIN_KEY,
        provider_webhook_secret=PROVIDER_SECRET,
        webhook_allow_hosts=("127.0.0.1",),
        redis_key_prefix=f"{REDIS_PREFIX}-api-{uuid.uuid4().hex[:12]}:",
        rate_limit_per_minute=1_000_000,
    )
    try:
        with running_api(settings, workers=1) as base:
            yield base
    finally:
        asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
