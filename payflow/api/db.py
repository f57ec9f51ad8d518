"""Connection acquisition typed as a plain `asyncpg.Connection`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import asyncpg


@asynccontextmanager
async def connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """Borrow a pooled connection for the block and give it back afterwards.

    The pool hands out a proxy that forwards every `Connection` method; the cast lets
    the query functions (which take `asyncpg.Connection`) accept it under mypy.
    """
    async with pool.acquire() as proxy:
        yield cast(asyncpg.Connection, proxy)
