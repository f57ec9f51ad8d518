"""Functions run in separate OS processes (spawned) by the concurrency tests."""

from __future__ import annotations

import asyncio
from typing import Any

from payflow.config import load_settings
from payflow.db.pool import create_pool
from payflow.errors import AlreadyProcessed
from payflow.ledger.posting import post_event
from payflow.ledger.together import PostingCoalescer


def post_after_barrier(database_url: str, event_ids: list[str], barrier: Any) -> list[str]:
    """Wait for every process, then post each event; return one outcome word per event."""

    async def run() -> list[str]:
        settings = load_settings(database_url=database_url, lock_timeout_ms=5000)
        pool = await create_pool(settings, min_size=1, max_size=2)
        try:
            barrier.wait(timeout=60)
            outcomes = []
            for event_id in event_ids:
                try:
                    result = await post_event(pool, settings, event_id)
                except AlreadyProcessed:
                    outcomes.append("already_processed")
                    continue
                outcomes.append("replayed" if result.replayed else result.outcome.value)
            return outcomes
        finally:
            await pool.close()

    return asyncio.run(run())


def post_together_after_barrier(database_url: str, event_ids: list[str], barrier: Any) -> list[str]:
    """Wait for every process, then post every event at once (one task each) through one
    `PostingCoalescer`, as the ledger worker does; one outcome word per event."""

    async def run() -> list[str]:
        settings = load_settings(database_url=database_url, lock_timeout_ms=5000)
        pool = await create_pool(settings, min_size=1, max_size=4)
        together = PostingCoalescer(pool, settings)
        try:
            barrier.wait(timeout=60)

            async def one(event_id: str) -> str:
                try:
                    result = await post_event(pool, settings, event_id, together=together)
                except AlreadyProcessed:
                    return "already_processed"
                return "replayed" if result.replayed else result.outcome.value

            return list(await asyncio.gather(*(one(e) for e in event_ids)))
        finally:
            await pool.close()

    return asyncio.run(run())
