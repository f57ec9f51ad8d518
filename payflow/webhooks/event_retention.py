"""Retention of the merchants' event stream (`merchant_events`).

The service's role cannot delete events: old rows go only through
`cleanup_merchant_events()` (migration 0035), a SECURITY DEFINER function that deletes
events created more than `min_age_days` ago (never less than 1 day), oldest first, in a
bounded batch with SKIP LOCKED. So an event stays listable for at least
EVENT_RETENTION_DAYS.
"""

from __future__ import annotations

import asyncpg
import structlog

from payflow.config import DatabaseSettings, RetentionSettings
from payflow.db import Connection
from payflow.jobs.purge import PurgeReport, purge_in_batches
from payflow.jobs.spec import JobContext, JobResult
from payflow.webhooks.events import SQL

log = structlog.get_logger("payflow.webhooks")

JOB_NAME = "cleanup_merchant_events"


async def purge_merchant_events(
    pool: asyncpg.Pool, settings: RetentionSettings, *, database: DatabaseSettings
) -> PurgeReport:
    """Delete events older than EVENT_RETENTION_DAYS through `cleanup_merchant_events`.

    Batches of EVENT_CLEANUP_BATCH rows, each in its own short transaction under the
    job's advisory lock, at most EVENT_CLEANUP_MAX_BATCHES per run (the next run
    continues); it stops early at a short batch. Returns what was deleted."""
    days = settings.event_retention_days
    batch_size = settings.event_cleanup_batch

    async def delete_batch(conn: Connection) -> int:
        return int(await conn.fetchval(SQL["cleanup_merchant_events"], days, batch_size))

    report = await purge_in_batches(
        pool,
        database,
        job=JOB_NAME,
        delete_batch=delete_batch,
        batch_size=batch_size,
        max_batches=settings.event_cleanup_max_batches,
    )
    if report.deleted:
        log.info("payflow.webhooks.events_cleaned", deleted=report.deleted, retention_days=days)
    return report


async def cleanup_merchant_events_job(ctx: JobContext) -> JobResult:
    """The scheduler job `cleanup_merchant_events` (`purge_merchant_events`)."""
    report = await purge_merchant_events(
        ctx.pool, ctx.slice(RetentionSettings), database=ctx.slice(DatabaseSettings)
    )
    return report.job_result()
