"""Retention of the webhook attempt log (`webhook_attempt_log`).

The service's role has no UPDATE or DELETE on the log (migration 0017): it is evidence
of what merchants answered. Old rows go only through `cleanup_webhook_attempt_log()`
(migration 0019), a SECURITY DEFINER function that deletes rows attempted more than
`min_age_days` ago (never less than 1 day), oldest first, in a bounded batch with SKIP
LOCKED.
"""

from __future__ import annotations

import asyncpg
import structlog

from payflow.config import DatabaseSettings, RetentionSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.jobs.purge import PurgeReport, purge_in_batches
from payflow.jobs.spec import JobContext, JobResult

SQL = load_queries("payflow.webhooks.attempts")
log = structlog.get_logger("payflow.webhooks")

JOB_NAME = "cleanup_webhook_attempt_log"


AttemptLogRetentionReport = PurgeReport  # deleted, batches, skipped


async def purge_webhook_attempt_log(
    pool: asyncpg.Pool, settings: RetentionSettings, *, database: DatabaseSettings
) -> AttemptLogRetentionReport:
    """Delete old attempt rows through `cleanup_webhook_attempt_log(days, batch)`.

    Batches of WEBHOOK_ATTEMPT_LOG_CLEANUP_BATCH rows (default 5,000), each in its own
    short transaction under the job's advisory lock, at most
    WEBHOOK_ATTEMPT_LOG_CLEANUP_MAX_BATCHES per run (the next run continues); it stops
    early at a short batch. Rows attempted more than WEBHOOK_ATTEMPT_LOG_RETENTION_DAYS
    ago go (the function never goes below 1 day); 0 disables it.
    """
    days = settings.webhook_attempt_log_retention_days
    if days <= 0:
        return AttemptLogRetentionReport(skipped=True)
    batch_size = settings.webhook_attempt_log_cleanup_batch

    async def delete_batch(conn: Connection) -> int:
        return int(await conn.fetchval(SQL["cleanup_webhook_attempt_log"], days, batch_size))

    report = await purge_in_batches(
        pool,
        database,
        job=JOB_NAME,
        delete_batch=delete_batch,
        batch_size=batch_size,
        max_batches=settings.webhook_attempt_log_cleanup_max_batches,
    )
    if report.deleted:
        log.info("payflow.webhooks.attempts_cleaned", deleted=report.deleted, retention_days=days)
    return report


async def cleanup_webhook_attempt_log(
    pool: asyncpg.Pool, settings: RetentionSettings, *, database: DatabaseSettings
) -> int:
    """Attempt-log retention by hand (`purge_webhook_attempt_log`); returns rows deleted."""
    return (await purge_webhook_attempt_log(pool, settings, database=database)).deleted


async def cleanup_webhook_attempt_log_job(ctx: JobContext) -> JobResult:
    """The scheduler job `cleanup_webhook_attempt_log` (`purge_webhook_attempt_log`)."""
    report = await purge_webhook_attempt_log(
        ctx.pool, ctx.slice(RetentionSettings), database=ctx.slice(DatabaseSettings)
    )
    return report.job_result()
