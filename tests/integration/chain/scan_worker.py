"""The process side of the two-replica scanner test; imports little so spawning is cheap."""

from __future__ import annotations

import asyncio
from typing import Any


def catch_up_after_barrier(args: tuple[dict[str, Any], Any]) -> tuple[int, int]:
    """Build a scanner from `settings`, wait for the sibling, catch up; (blocks walked,
    steps that lost the cursor race)."""
    overrides, barrier = args
    return asyncio.run(_catch_up(overrides, barrier))


async def _catch_up(overrides: dict[str, Any], barrier: Any) -> tuple[int, int]:
    from payflow.chain.finality import FinalityOracle
    from payflow.chain.watch.scanner import Scanner
    from payflow.config import load_settings
    from payflow.db.pool import create_pool

    settings = load_settings(**overrides)
    pool = await create_pool(settings, min_size=1, max_size=5)
    oracle = FinalityOracle(settings, None, redis_settings=settings)
    try:
        await asyncio.to_thread(barrier.wait)
        results = await Scanner(pool, settings, oracle, database=settings).catch_up("ETH_MAINNET")
        return sum(r.walked for r in results), sum(r.lost_race for r in results)
    finally:
        await oracle.aclose()
        await pool.close()
