"""Connection acquisition typed as a plain `asyncpg.Connection`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import asyncpg

# Longest wait for a free pooled connection before answering 503 (read at call time).
ACQUIRE_TIMEOUT_SECONDS = 5.0


@asynccontextmanager
async def connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """Borrow a pooled connection for the block and give it back afterwards.

    Waiting longer than `ACQUIRE_TIMEOUT_SECONDS` for a free connection raises
    `TimeoutError`, which the exception handler answers as 503 with Retry-After instead
    of queueing forever. The pool hands out a proxy that forwards every `Connection`
    method; the cast lets the query functions (typed `asyncpg.Connection`) accept it.
    """
    async with pool.acquire(timeout=ACQUIRE_TIMEOUT_SECONDS) as proxy:
        yield cast(asyncpg.Connection, proxy)
