"""Database-side sweeps of payment processing and webhook delivery.

Nothing depends on the broker (or a consumer being up) to remember work: every kind of
job has a sweep that finds, in PostgreSQL, what is overdue and re-announces it through
the outbox (ledger events: `ops/recovery.py`). Each sweep is a plain async function,
idempotent per tick: one transaction under the job's advisory lock, a batch claimed
`FOR UPDATE SKIP LOCKED`, nothing re-announced while an unpublished outbox row for the
same subject exists, and a doubling wait per subject (`min(first * 2^n,
SWEEP_MAX_BACKOFF_S)`) so a long outage adds a handful of messages, not a flood.
Re-announcing is safe because every handler is idempotent on its subject (payment
processing claims the charge before calling the gateway; a webhook keeps its
`webhook-id`).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import asyncpg
import structlog

from payflow.alerts import Severity
from payflow.broker.topology import TOPIC_PAYMENT_CREATED, TOPIC_WEBHOOK_DELIVER
from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, Outcome
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.ops")
log = structlog.get_logger("payflow.ops")

SWEEP_BATCH = 200


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep did: subjects re-announced, and how many of them had been
    re-announced `MAX_EVENT_RETRIES` times already (`waiting`, alerted)."""

    announced: int = 0
    waiting: int = 0
    skipped: bool = False  # another replica holds the job's lock


async def sweep_pending_payments(pool: asyncpg.Pool, settings: Settings) -> SweepReport:
    """Re-announce `payment.created` for payments still `pending` past their wait
    (`PAYMENT_SWEEP_AFTER_S` after creation, doubling per sweep).

    Invariant: the count, the time and the outbox row commit together; a payment
    that has an unpublished `payment.created` row is left alone; from
    `MAX_EVENT_RETRIES` sweeps on, each logs `payflow.payments.waiting`.
    """
    return await _sweep(
        pool,
        settings,
        job="sweep_pending_payments",
        select=SQL["overdue_pending_payments"],
        count=SQL["count_payment_sweep"],
        topic=TOPIC_PAYMENT_CREATED,
        first_wait_s=settings.payment_sweep_after_s,
        alert="payflow.payments.waiting",
    )


async def sweep_undelivered_webhooks(pool: asyncpg.Pool, settings: Settings) -> SweepReport:
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
    return await _sweep(
        pool,
        settings,
        job="sweep_undelivered_webhooks",
        select=SQL["overdue_webhooks"],
        count=SQL["count_webhook_sweep"],
        topic=TOPIC_WEBHOOK_DELIVER,
        first_wait_s=settings.webhook_sweep_after_s,
        alert="payflow.webhooks.waiting",
    )


async def _sweep(
    pool: asyncpg.Pool,
    settings: Settings,
    *,
    job: str,
    select: str,
    count: str,
    topic: str,
    first_wait_s: float,
    alert: str,
) -> SweepReport:
    announced = 0
    waiting: list[tuple[UUID, int, str | None]] = []
    async with pool.acquire() as conn, transaction(conn, settings):
        if not await job_lock(conn, job):
            return SweepReport(skipped=True)
        rows = await conn.fetch(select, first_wait_s, settings.sweep_max_backoff_s, SWEEP_BATCH)
        for row in rows:
            payment_id: UUID = row["id"]
            sweeps = await conn.fetchval(count, payment_id)
            if sweeps is None:
                continue  # cannot happen under the row lock; kept as a guard
            await enqueue(
                conn, topic, {"version": 1, "payment_id": str(payment_id)}, row["trace_id"]
            )
            announced += 1
            if sweeps >= settings.max_event_retries:
                waiting.append((payment_id, int(sweeps), row["trace_id"]))
    for payment_id, sweeps, trace_id in waiting:
        log.warning(alert, payment_id=str(payment_id), trace_id=trace_id, announcements=sweeps)
    if announced:
        log.warning("payflow.sweep.done", job=job, announced=announced, waiting=len(waiting))
    return SweepReport(announced=announced, waiting=len(waiting))


async def sweep_pending_payments_job(ctx: JobContext) -> JobResult:
    """The scheduler job `sweep_pending_payments`; alert `payments.waiting` as the log."""
    report = await sweep_pending_payments(ctx.pool, ctx.settings)
    return await _sweep_result(ctx, report, "payments.waiting", "payment(s)")


async def sweep_undelivered_webhooks_job(ctx: JobContext) -> JobResult:
    """The scheduler job `sweep_undelivered_webhooks`; alert `webhooks.waiting`."""
    report = await sweep_undelivered_webhooks(ctx.pool, ctx.settings)
    return await _sweep_result(ctx, report, "webhooks.waiting", "webhook(s)")


async def _sweep_result(ctx: JobContext, report: SweepReport, key: str, what: str) -> JobResult:
    if report.skipped:
        return JobResult(Outcome.SKIPPED, "another replica holds the lock")
    summary = f"announced={report.announced} waiting={report.waiting}"
    if report.waiting:
        retries = ctx.settings.max_event_retries
        await ctx.alerts.fire(
            key,
            Severity.WARNING,
            f"{report.waiting} {what} re-announced {retries}+ times",
            details={"waiting": report.waiting},
        )
        return JobResult(Outcome.ALERT, summary)
    await ctx.alerts.resolve(key)
    return JobResult(Outcome.OK, summary)
