"""A throwaway database for migration tests that walk one database up and down, and a
helper that runs SQL on it in one transaction (what the migrations see, no pool)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from payflow.db import migrate
from tests.conftest import SERVER_URL


@contextmanager
def scratch_database(label: str) -> Iterator[str]:
    """An empty database `payflow_test_<label>_<random>` on the test server, dropped (with
    FORCE) afterwards; yields its URL."""
    url = f"{SERVER_URL}/payflow_test_{label}_{uuid.uuid4().hex[:8]}"
    assert asyncio.run(migrate.ensure_database(url)) is True
    try:
        yield url
    finally:

        async def drop() -> None:
            conn = await asyncpg.connect(migrate.admin_url(url))
            try:
                await conn.execute(f'DROP DATABASE "{migrate.database_name(url)}" WITH (FORCE)')
            finally:
                await conn.close()

        asyncio.run(drop())


def run_sql(url: str, *statements: str) -> list[asyncpg.Record]:
    """Run `statements` in one transaction on `url`; the last one's rows."""

    async def run() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(url)
        try:
            rows: list[asyncpg.Record] = []
            async with conn.transaction():
                for statement in statements:
                    rows = list(await conn.fetch(statement))
            return rows
        finally:
            await conn.close()

    return asyncio.run(run())
