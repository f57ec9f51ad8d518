"""The webhooks' sweep: undelivered webhooks no live chain owns are re-announced."""

from __future__ import annotations

import asyncpg

from payflow.broker.topology import TOPIC_WEBHOOK_DELIVER
from payflow.config import DatabaseSettings, PipelineSettings
from payflow.db.queries import load_queries
from payflow.jobs.spec import JobContext, JobResult
from payflow.outbox.sweep import SweepReport, sweep, sweep_result

SQL = load_queries("payflow.webhooks")


async def sweep_undelivered_webhooks(
    pool: asyncpg.Pool, settings: PipelineSettings, *, database: DatabaseSettings
) -> SweepReport:
    """Re-announce `webhook.deliver` for final payments with a webhook URL whose
    webhook is neither delivered nor dead-lettered and has no live retry chain: the chain
    that owns the job was expected back (its lease's end, its retry tier's end; never
    claimed: `processed_at`) more than `WEBHOOK_SWEEP_AFTER_S` ago (doubling per sweep).

    Invariant: a job still in a send or on its retry tiers is never re-announced, however
    old its payment (one live chain per job, `payflow.webhooks.chains`); a dead-lettered
    webhook (`webhook_dead_at`) is never re-sent by the sweep (delivered or
    dead-lettered, never both); otherwise as `sweep_pending_payments`, with the alert
    `payflow.webhooks.waiting`.
    """
    return await sweep(
        pool,
        settings,
        database=database,
        job="sweep_undelivered_webhooks",
        select=SQL["overdue_webhooks"],
        count=SQL["count_webhook_sweep"],
        topic=TOPIC_WEBHOOK_DELIVER,
        first_wait_s=settings.webhook_sweep_after_s,
        alert="payflow.webhooks.waiting",
    )


async def sweep_undelivered_webhooks_job(ctx: JobContext) -> JobResult:
    """The scheduler job `sweep_undelivered_webhooks`; alert `webhooks.waiting`."""
    report = await sweep_undelivered_webhooks(
        ctx.pool, ctx.slice(PipelineSettings), database=ctx.slice(DatabaseSettings)
    )
    return await sweep_result(ctx, report, "webhooks.waiting", "webhook(s)")
