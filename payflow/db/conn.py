"""Typed pool checkout: asyncpg's pool hands out proxies that the stubs do not treat as
connections; this is the one place that bridges the two."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import asyncpg


@asynccontextmanager
async def acquire(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """Check a connection out of `pool` for the block; it goes back afterwards."""
    async with pool.acquire() as proxy:
        yield cast(asyncpg.Connection, proxy)
