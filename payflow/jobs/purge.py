"""Bounded, batched deletion for retention jobs: one short transaction per batch under
the job's advisory lock, so replicas never purge together and no batch holds many row
locks for long."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncpg

from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobResult, Outcome


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What one purge did: rows deleted, batches run, and whether it did not run at all
    (`skipped`: retention disabled, or another replica holds the job's lock)."""

    deleted: int = 0
    batches: int = 0
    skipped: bool = False

    def job_result(self) -> JobResult:
        """The scheduler's record of this purge."""
        if self.skipped:
            return JobResult(Outcome.SKIPPED, "disabled or another replica holds the lock")
        return JobResult(Outcome.OK, f"deleted={self.deleted} batches={self.batches}")


async def purge_in_batches(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    *,
    job: str,
    delete_batch: Callable[[Connection], Awaitable[int]],
    batch_size: int,
    max_batches: int,
    pause_s: float = 0.0,
) -> PurgeReport:
    """Run `delete_batch(conn)` (rows deleted, at most `batch_size`) in its own
    transaction under `job`'s advisory lock, up to `max_batches` times, `pause_s` seconds
    apart; stop at a short batch (the next run continues where this one stopped).
    `skipped` when another replica held the lock before the first batch."""
    deleted = batches = 0
    for index in range(max_batches):
        if index and pause_s:
            await asyncio.sleep(pause_s)
        async with pool.acquire() as conn, transaction(conn, settings):
            if not await job_lock(conn, job):
                return PurgeReport(deleted, batches, skipped=batches == 0)
            batch = await delete_batch(conn)
        deleted += batch
        batches += 1
        if batch < batch_size:
            break
    return PurgeReport(deleted, batches)
