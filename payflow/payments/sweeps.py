"""The payments' sweep: payments still pending past their wait are re-announced."""

from __future__ import annotations

import asyncpg

from payflow.broker.topology import TOPIC_PAYMENT_CREATED
from payflow.config import DatabaseSettings, PipelineSettings
from payflow.db.queries import load_queries
from payflow.jobs.spec import JobContext, JobResult
from payflow.outbox.sweep import SweepReport, sweep, sweep_result

SQL = load_queries("payflow.payments")


async def sweep_pending_payments(
    pool: asyncpg.Pool, settings: PipelineSettings, *, database: DatabaseSettings
) -> SweepReport:
    """Re-announce `payment.created` for payments still `pending` past their wait
    (`PAYMENT_SWEEP_AFTER_S` after creation, doubling per sweep).

    Invariant: the count, the time and the outbox row commit together; a payment
    that has an unpublished `payment.created` row is left alone; from
    `MAX_EVENT_RETRIES` sweeps on, each logs `payflow.payments.waiting`.
    """
    return await sweep(
        pool,
        settings,
        database=database,
        job="sweep_pending_payments",
        select=SQL["overdue_pending_payments"],
        count=SQL["count_payment_sweep"],
        topic=TOPIC_PAYMENT_CREATED,
        first_wait_s=settings.payment_sweep_after_s,
        alert="payflow.payments.waiting",
    )


async def sweep_pending_payments_job(ctx: JobContext) -> JobResult:
    """The scheduler job `sweep_pending_payments`; alert `payments.waiting` as the log."""
    report = await sweep_pending_payments(
        ctx.pool, ctx.slice(PipelineSettings), database=ctx.slice(DatabaseSettings)
    )
    return await sweep_result(ctx, report, "payments.waiting", "payment(s)")
