"""Outbox maintenance: alerts for rows left unpublished and retention of published rows."""

from __future__ import annotations

import asyncpg
import structlog

from payflow.alerts import Severity
from payflow.config import DatabaseSettings, JobsSettings, OutboxSettings, RetentionSettings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, JobSpec, Outcome

SQL = load_queries("payflow.outbox")
log = structlog.get_logger("payflow.outbox")

RETENTION_BATCH = 5000


async def alert_stale_outbox(pool: asyncpg.Pool, settings: OutboxSettings) -> int:
    """Log `payflow.outbox.stale` when rows stay unpublished too long; returns their count."""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(SQL["stale_unpublished"], settings.outbox_stale_alert_s)
    assert row is not None
    stale = int(row["stale"])
    if stale:
        log.error(
            "payflow.outbox.stale",
            count=stale,
            oldest_id=row["oldest_id"],
            oldest_created_at=row["oldest"].isoformat(),
        )
    return stale


async def cleanup_outbox(
    pool: asyncpg.Pool, settings: RetentionSettings, *, database: DatabaseSettings
) -> int:
    """Delete published rows older than the retention; unpublished rows are never touched.
    A retention of 0 disables the cleanup. Returns the number deleted."""
    if settings.outbox_retention_hours <= 0:
        return 0
    async with pool.acquire() as conn, transaction(conn, database):
        if not await job_lock(conn, "cleanup_outbox"):
            return 0
        status = await conn.execute(
            SQL["delete_published_before"],
            settings.outbox_retention_hours * 3600,
            RETENTION_BATCH,
        )
    deleted = int(status.split()[-1])
    if deleted:
        log.info("payflow.outbox.cleaned", deleted=deleted)
    return deleted


async def alert_stale_outbox_job(ctx: JobContext) -> JobResult:
    """The scheduler job `alert_stale_outbox`: warning `outbox.stale` while rows stay
    unpublished longer than OUTBOX_STALE_ALERT_S, resolved when none do."""
    settings = ctx.slice(OutboxSettings)
    stale = await alert_stale_outbox(ctx.pool, settings)
    if stale:
        await ctx.alerts.fire(
            "outbox.stale",
            Severity.WARNING,
            f"{stale} outbox row(s) unpublished for over {settings.outbox_stale_alert_s:g} s",
            details={"stale": stale},
        )
        return JobResult(Outcome.ALERT, f"stale={stale}")
    await ctx.alerts.resolve("outbox.stale")
    return JobResult(Outcome.OK, "stale=0")


async def cleanup_outbox_job(ctx: JobContext) -> JobResult:
    """The scheduler job `cleanup_outbox`: one bounded retention batch."""
    settings = ctx.slice(RetentionSettings)
    if settings.outbox_retention_hours <= 0:
        return JobResult(Outcome.SKIPPED, "disabled (OUTBOX_RETENTION_HOURS=0)")
    deleted = await cleanup_outbox(ctx.pool, settings, database=ctx.slice(DatabaseSettings))
    return JobResult(Outcome.OK, f"deleted={deleted}")


# The outbox's maintenance jobs; the scheduler (composition root) gathers them.
JOBS: tuple[JobSpec, ...] = (
    JobSpec(
        "alert_stale_outbox",
        alert_stale_outbox_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "outbox rows left unpublished",
    ),
    JobSpec(
        "cleanup_outbox",
        cleanup_outbox_job,
        lambda s: s.slice(JobsSettings).scheduler_interval_s,
        "retention of published outbox rows",
    ),
)
