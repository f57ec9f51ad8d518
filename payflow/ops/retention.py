"""Retention of `api_idempotency` records (`IDEMPOTENCY_RETENTION_HOURS`).

An idempotency record only speeds up and sharpens a replay (byte-identical body, 409
on any change of the body). After its retention the domain row the request made, the
payment (`payments_merchant_idempotency_unique`) or the `wd:` payment event, is the
last word on the key: a retry is compared with it and answered from it, or refused
with 409 (see docs/api.md, "Idempotency"). So deleting old records loses no safety.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import structlog

from payflow.config import DatabaseSettings, RetentionSettings, SliceSource
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, Outcome

SQL = load_queries("payflow.ops")
log = structlog.get_logger("payflow.ops")

JOB_NAME = "cleanup_idempotency_keys"
RETENTION_BATCH = 1000
MAX_BATCHES_PER_TICK = 50


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What one retention pass did."""

    deleted: int = 0
    skipped: bool = False  # another replica holds the job's lock


async def cleanup_idempotency_keys(
    pool: asyncpg.Pool, settings: SliceSource, *, batch_size: int = RETENTION_BATCH
) -> RetentionReport:
    """Delete `api_idempotency` rows created more than `idempotency_retention_hours` ago.

    Works in batches of `batch_size` rows, oldest first, each in its own short
    transaction under the job's advisory lock (so replicas never run it together and
    no batch holds many row locks for long), at most `MAX_BATCHES_PER_TICK` batches per
    call; the next tick continues. Younger rows are never touched. Returns how many
    rows were deleted, or `skipped` when another replica holds the lock.
    """
    retention_s = settings.slice(RetentionSettings).idempotency_retention_hours * 3600
    database = settings.slice(DatabaseSettings)
    deleted = 0
    for _ in range(MAX_BATCHES_PER_TICK):
        async with pool.acquire() as conn, transaction(conn, database):
            if not await job_lock(conn, JOB_NAME):
                return RetentionReport(deleted=deleted, skipped=deleted == 0)
            status = await conn.execute(SQL["delete_idempotency_before"], retention_s, batch_size)
        batch = int(status.split()[-1])
        deleted += batch
        if batch < batch_size:
            break
    if deleted:
        log.info("payflow.idempotency.cleaned", deleted=deleted)
    return RetentionReport(deleted=deleted)


async def cleanup_idempotency_keys_job(ctx: JobContext) -> JobResult:
    """The scheduler job `cleanup_idempotency_keys`: one bounded retention pass."""
    report = await cleanup_idempotency_keys(ctx.pool, ctx.settings)
    if report.skipped:
        return JobResult(Outcome.SKIPPED, "another replica holds the lock")
    return JobResult(Outcome.OK, f"deleted={report.deleted}")
