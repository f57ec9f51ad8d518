"""Maintenance jobs. Each is a plain async function (the CLI can run it by hand) that
does its work in one transaction guarded by a transaction-scoped advisory lock, so
that across any number of scheduler replicas a job runs at most once at a time.

`recover_stale_events` is the ledger's database-side sweep: an event that waits for a
consumer is not stale, it is re-announced (with a doubling wait) and, when it has
waited long, alerted on, but never failed for waiting. Only the consumer fails an
event, for a reason about the event itself (its own dead-lettering). The sweeps of the
other jobs (payment processing, webhook delivery) live in `payments/sweeps.py` and
`webhooks/sweeps.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import structlog

from payflow.alerts import Severity
from payflow.broker.topology import TOPIC_LEDGER_EVENT
from payflow.config import DatabaseSettings, PipelineSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.jobs.lock import job_lock
from payflow.jobs.spec import JobContext, JobResult, Outcome
from payflow.ledger.states import EventStatus, transition
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.ledger")
log = structlog.get_logger("payflow.ops")

RECOVERY_BATCH = 200


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What one recovery pass did: events re-announced (`recovered`), and how many of
    them had already been re-announced `MAX_EVENT_RETRIES` times (`waiting`, alerted)."""

    recovered: int = 0
    waiting: int = 0
    skipped: bool = False  # another replica holds the job's lock


async def recover_stale_events(
    pool: asyncpg.Pool, settings: PipelineSettings, *, database: DatabaseSettings
) -> RecoveryReport:
    """Re-announce ledger events that nothing is finishing; one tick, one transaction.

    * `enqueued` past their wait (handed to the broker, never posted): back to
      `pending` through `transition()`, `retry_count + 1`, a fresh `ledger.event` row.
    * `pending` past their wait with no unpublished `ledger.event` row: `retry_count
      + 1` and a fresh row (the relay moves them to `enqueued` when it publishes).

    The wait is `min(STALE_EVENT_TIMEOUT_S * 2^retry_count, SWEEP_MAX_BACKOFF_S)` since
    the last move, so a long consumer outage adds a handful of messages, not a flood.
    From `MAX_EVENT_RETRIES` re-announcements on, each one logs `payflow.events.waiting`
    (warning). Invariant: no event is ever failed here; each event's move, its count
    and its outbox row commit together; posting stays exactly-once (`processed_events`).
    """
    recovered = 0
    waiting: list[tuple[str, int, str | None]] = []
    async with pool.acquire() as conn, transaction(conn, database):
        if not await job_lock(conn, "recover_stale_events"):
            return RecoveryReport(skipped=True)
        args = (settings.stale_event_timeout_s, settings.sweep_max_backoff_s, RECOVERY_BATCH)
        for row in await conn.fetch(SQL["stale_enqueued_events"], *args):
            moved = await transition(
                conn, row["event_id"], EventStatus.PENDING, expected=EventStatus.ENQUEUED
            )
            if moved.changed:
                count = await _reannounce(conn, row, "not finished while enqueued; re-announced")
                recovered += 1
                if count >= settings.max_event_retries:
                    waiting.append((row["event_id"], count, row["trace_id"]))
        for row in await conn.fetch(SQL["orphaned_pending_events"], *args):
            count = await _reannounce(conn, row, "pending with no announcement; re-announced")
            recovered += 1
            if count >= settings.max_event_retries:
                waiting.append((row["event_id"], count, row["trace_id"]))
        unfinished = await conn.fetch(
            SQL["stale_unfinished_events"], settings.stale_event_timeout_s
        )
    for row in unfinished:
        log.warning("payflow.events.stale", status=row["status"], count=row["stale"])
    for event_id, count, trace_id in waiting:
        log.warning(
            "payflow.events.waiting", event_id=event_id, trace_id=trace_id, announcements=count
        )
    if recovered:
        log.warning("payflow.recovery.done", recovered=recovered, waiting=len(waiting))
    return RecoveryReport(recovered=recovered, waiting=len(waiting))


async def _reannounce(conn: Connection, row: asyncpg.Record, reason: str) -> int:
    """Count one re-announcement and write the fresh `ledger.event` row; returns the count."""
    event_id: str = row["event_id"]
    count: int = await conn.fetchval(SQL["bump_retry_count"], event_id, reason)
    await enqueue(conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, row["trace_id"])
    return count


async def recover_stale_events_job(ctx: JobContext) -> JobResult:
    """The scheduler job `recover_stale_events`: one pass of `recover_stale_events`.

    Outcome `skipped` when another replica holds the job's lock, `alert` (and the
    warning `events.waiting`) when events were re-announced `MAX_EVENT_RETRIES` times or
    more, else `ok` (and `events.waiting` resolved).
    """
    settings = ctx.slice(PipelineSettings)
    report = await recover_stale_events(ctx.pool, settings, database=ctx.slice(DatabaseSettings))
    if report.skipped:
        return JobResult(Outcome.SKIPPED, "another replica holds the lock")
    summary = f"recovered={report.recovered} waiting={report.waiting}"
    if report.waiting:
        await ctx.alerts.fire(
            "events.waiting",
            Severity.WARNING,
            f"{report.waiting} ledger event(s) re-announced {settings.max_event_retries}+ times",
            details={"waiting": report.waiting},
        )
        return JobResult(Outcome.ALERT, summary)
    await ctx.alerts.resolve("events.waiting")
    return JobResult(Outcome.OK, summary)
