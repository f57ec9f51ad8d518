"""Test infrastructure on the real services.

A template database is built from the migrations once per run; every test that
needs PostgreSQL gets its own `CREATE DATABASE ... TEMPLATE` copy with a unique
name, dropped afterwards, so runs and tests never collide.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from payflow.config import Settings, load_settings
from payflow.db import migrate
from payflow.db.pool import create_pool

SERVER_URL = os.environ.get("PAYFLOW_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
RUN_ID = uuid.uuid4().hex[:10]


def _url(name: str) -> str:
    return f"{SERVER_URL}/{name}"


async def _admin_execute(sql: str) -> None:
    conn = await asyncpg.connect(_url("postgres"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def template_database() -> Iterator[str]:
    """A migrated database that per-test databases are cloned from."""
    import asyncio

    name = f"payflow_test_{RUN_ID}_tpl"
    asyncio.run(_admin_execute(f'CREATE DATABASE "{name}"'))
    migrate.upgrade(_url(name))
    yield name
    asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def database_url(template_database: str) -> AsyncIterator[str]:
    """A fresh, migrated database for one test."""
    name = f"payflow_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    await _admin_execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    yield _url(name)
    await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(database_url: str) -> Settings:
    return load_settings(database_url=database_url, lock_timeout_ms=2000)


@pytest.fixture
async def pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(settings, min_size=1, max_size=10)
    yield pool
    await pool.close()


@pytest.fixture
async def owner_pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    """A pool with the schema owner's rights, for test set-up the service may not do
    (backdating timestamps, deleting rows). The `pool` fixture is the service's view."""
    pool = await create_pool(settings, min_size=1, max_size=2)
    yield pool
    await pool.close()
