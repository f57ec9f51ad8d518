"""The process side of the concurrent derivation test; imports little so spawning is cheap."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any


def allocate_after_barrier(args: tuple[str, str, str, int, Any]) -> list[tuple[int, str]]:
    """Connect, wait for every sibling at the barrier, then allocate `count` addresses,
    one transaction each (the API's path below HTTP)."""
    database_url, account, xpub, count, barrier = args
    return asyncio.run(_allocate(database_url, uuid.UUID(account), xpub, count, barrier))


async def _allocate(
    database_url: str, account: uuid.UUID, xpub: str, count: int, barrier: Any
) -> list[tuple[int, str]]:
    import asyncpg

    from payflow.chain.watch.derivation import allocate_address

    conn = await asyncpg.connect(database_url)
    try:
        await asyncio.to_thread(barrier.wait)
        out = []
        for _ in range(count):
            async with conn.transaction():
                derived = await allocate_address(
                    conn, chain="ETH_MAINNET", account_id=account, xpub=xpub
                )
            out.append((derived.index, derived.address))
        return out
    finally:
        await conn.close()
