"""Migrations go up on an empty database, down to nothing, and up again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from payflow.db import migrate
from tests.conftest import SERVER_URL

EXPECTED_TABLES = {
    "accounts",
    "assets",
    "balance_events",
    "dead_letter_queue",
    "payment_events",
    "processed_events",
    "merchants",
    "payments",
    "outbox",
}


async def _tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename <> 'alembic_version'"
        )
    finally:
        await conn.close()
    return {r["tablename"] for r in rows}


@pytest.fixture
def empty_database_url() -> Iterator[str]:
    url = f"{SERVER_URL}/payflow_test_migrate_{uuid.uuid4().hex[:8]}"
    assert asyncio.run(migrate.ensure_database(url)) is True
    yield url

    async def drop() -> None:
        conn = await asyncpg.connect(migrate.admin_url(url))
        try:
            await conn.execute(f'DROP DATABASE "{migrate.database_name(url)}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


def test_up_down_up(empty_database_url: str) -> None:
    url = empty_database_url
    migrate.upgrade(url)
    migrate.upgrade(url)  # idempotent
    after_up = asyncio.run(_tables(url))
    assert EXPECTED_TABLES <= after_up
    assert asyncio.run(_seeded_assets(url)) == {
        "ETH": 18,
        "USDC": 6,
        "USDT": 6,
        "WBTC": 8,
        "DAI": 18,
        "RUB": 2,
        "USD": 2,
        "EUR": 2,
    }
    migrate.downgrade(url, "base")
    assert asyncio.run(_tables(url)) == set()
    migrate.upgrade(url)
    assert asyncio.run(_tables(url)) == after_up


async def _seeded_assets(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        return {r["code"]: r["scale"] for r in await conn.fetch("SELECT code, scale FROM assets")}
    finally:
        await conn.close()
