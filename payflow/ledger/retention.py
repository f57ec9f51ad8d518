"""Retention of posting claims (`processed_events`).

The service's role has no DELETE on `processed_events`: a deleted claim would let an
event post twice. Old claims go only through `cleanup_processed_events()` (migration
0009), a SECURITY DEFINER function that deletes terminal outcomes (never `pending`) of
terminal events older than at least 14 days, in a bounded batch with SKIP LOCKED.
"""

from __future__ import annotations

import asyncpg
import structlog

from payflow.config import DatabaseSettings, RetentionSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.jobs.purge import PurgeReport, purge_in_batches
from payflow.jobs.spec import JobContext, JobResult

SQL = load_queries("payflow.ledger")
log = structlog.get_logger("payflow.ledger")

JOB_NAME = "cleanup_processed_events"


ClaimRetentionReport = PurgeReport  # deleted, batches, skipped


async def purge_processed_events(
    pool: asyncpg.Pool, settings: RetentionSettings, *, database: DatabaseSettings
) -> ClaimRetentionReport:
    """Delete old posting claims through `cleanup_processed_events(days, batch)`.

    Batches of PROCESSED_EVENTS_CLEANUP_BATCH claims (default 5,000), each in its own short
    transaction under the job's advisory lock, with PROCESSED_EVENTS_CLEANUP_PAUSE_S
    between two batches, at most PROCESSED_EVENTS_CLEANUP_MAX_BATCHES per run (the next
    run continues); it stops early at a short batch. Claims older than
    PROCESSED_EVENTS_RETENTION_DAYS go (the function never goes below 14 days, never
    deletes a `pending` claim or the claim of an unfinished event); 0 disables it.
    """
    days = settings.processed_events_retention_days
    if days <= 0:
        return ClaimRetentionReport(skipped=True)
    batch_size = settings.processed_events_cleanup_batch

    async def delete_batch(conn: Connection) -> int:
        return int(await conn.fetchval(SQL["cleanup_processed_events"], days, batch_size))

    report = await purge_in_batches(
        pool,
        database,
        job=JOB_NAME,
        delete_batch=delete_batch,
        batch_size=batch_size,
        max_batches=settings.processed_events_cleanup_max_batches,
        pause_s=settings.processed_events_cleanup_pause_s,
    )
    if report.deleted:
        log.info("payflow.ledger.claims_cleaned", deleted=report.deleted, retention_days=days)
    return report


async def cleanup_processed_events(
    pool: asyncpg.Pool, settings: RetentionSettings, *, database: DatabaseSettings
) -> int:
    """Claim retention by hand (`purge_processed_events`); returns the claims deleted."""
    return (await purge_processed_events(pool, settings, database=database)).deleted


async def cleanup_processed_events_job(ctx: JobContext) -> JobResult:
    """The scheduler job `cleanup_processed_events` (`purge_processed_events`)."""
    report = await purge_processed_events(
        ctx.pool, ctx.slice(RetentionSettings), database=ctx.slice(DatabaseSettings)
    )
    return report.job_result()
