"""The database-side sweep the domains' sweeps share (payments: `payments/sweeps.py`,
webhooks: `webhooks/sweeps.py`; each passes its own statements).

Nothing depends on the broker (or a consumer being up) to remember work: every kind of
job has a sweep that finds, in PostgreSQL, what is overdue and re-announces it through
the outbox (ledger events: `ledger/recovery.py`). Each sweep is a plain async function,
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
from payflow.config import DatabaseSettings, PipelineSettings
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, Outcome
from payflow.outbox.writer import enqueue

log = structlog.get_logger("payflow.ops")

SWEEP_BATCH = 200


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep did: subjects re-announced, and how many of them had been
    re-announced `MAX_EVENT_RETRIES` times already (`waiting`, alerted)."""

    announced: int = 0
    waiting: int = 0
    skipped: bool = False  # another replica holds the job's lock


async def sweep(
    pool: asyncpg.Pool,
    settings: PipelineSettings,
    *,
    database: DatabaseSettings,
    job: str,
    select: str,
    count: str,
    topic: str,
    first_wait_s: float,
    alert: str,
) -> SweepReport:
    """One sweep tick under the job's lock, in one transaction: `select` (the owning
    domain's statement: $1 first wait, $2 max backoff, $3 batch; rows with `id` (a
    payment id) and `trace_id`, locked) finds the overdue subjects; for each, `count`
    ($1 id; NULL: skip) counts the re-announcement and `topic` gets a fresh outbox row
    (`{"version": 1, "payment_id": …}`); from `MAX_EVENT_RETRIES` on each logs `alert`.
    """
    announced = 0
    waiting: list[tuple[UUID, int, str | None]] = []
    async with pool.acquire() as conn, transaction(conn, database):
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


async def sweep_result(ctx: JobContext, report: SweepReport, key: str, what: str) -> JobResult:
    """A sweep's job result: SKIPPED when another replica held the lock; ALERT (firing
    `key`) when some `what` were re-announced `MAX_EVENT_RETRIES`+ times; else OK
    (resolving `key`)."""
    if report.skipped:
        return JobResult(Outcome.SKIPPED, "another replica holds the lock")
    summary = f"announced={report.announced} waiting={report.waiting}"
    if report.waiting:
        retries = ctx.slice(PipelineSettings).max_event_retries
        await ctx.alerts.fire(
            key,
            Severity.WARNING,
            f"{report.waiting} {what} re-announced {retries}+ times",
            details={"waiting": report.waiting},
        )
        return JobResult(Outcome.ALERT, summary)
    await ctx.alerts.resolve(key)
    return JobResult(Outcome.OK, summary)
