"""Retention of the webhook attempt log (`webhook_attempt_log`).

The service's role has no UPDATE or DELETE on the log (migration 0017): it is evidence
of what merchants answered. Old rows go only through `cleanup_webhook_attempt_log()`
(migration 0019), a SECURITY DEFINER function that deletes rows attempted more than
`min_age_days` ago (never less than 1 day), oldest first, in a bounded batch with SKIP
LOCKED.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import structlog

from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.ops.jobs import JobContext, JobResult, Outcome
from payflow.ops.recovery import job_lock

SQL = load_queries("payflow.webhooks.attempts")
log = structlog.get_logger("payflow.webhooks")

JOB_NAME = "cleanup_webhook_attempt_log"


@dataclass(frozen=True, slots=True)
class AttemptLogRetentionReport:
    """What one run of attempt-log retention did: rows deleted, batches run, and whether
    it did not run at all (`skipped`: disabled, or another replica holds the lock)."""

    deleted: int = 0
    batches: int = 0
    skipped: bool = False


async def purge_webhook_attempt_log(
    pool: asyncpg.Pool, settings: Settings
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
    deleted = batches = 0
    for _ in range(settings.webhook_attempt_log_cleanup_max_batches):
        async with pool.acquire() as conn, transaction(conn, settings):
            if not await job_lock(conn, JOB_NAME):
                return AttemptLogRetentionReport(deleted, batches, skipped=batches == 0)
            batch = int(await conn.fetchval(SQL["cleanup_webhook_attempt_log"], days, batch_size))
        deleted += batch
        batches += 1
        if batch < batch_size:
            break
    if deleted:
        log.info("payflow.webhooks.attempts_cleaned", deleted=deleted, retention_days=days)
    return AttemptLogRetentionReport(deleted, batches)


async def cleanup_webhook_attempt_log(pool: asyncpg.Pool, settings: Settings) -> int:
    """Attempt-log retention by hand (`purge_webhook_attempt_log`); returns rows deleted."""
    return (await purge_webhook_attempt_log(pool, settings)).deleted


async def cleanup_webhook_attempt_log_job(ctx: JobContext) -> JobResult:
    """The scheduler job `cleanup_webhook_attempt_log` (`purge_webhook_attempt_log`)."""
    report = await purge_webhook_attempt_log(ctx.pool, ctx.settings)
    if report.skipped:
        return JobResult(Outcome.SKIPPED, "disabled or another replica holds the lock")
    return JobResult(Outcome.OK, f"deleted={report.deleted} batches={report.batches}")
