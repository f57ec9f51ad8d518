"""Maintenance jobs. Each is a plain async function (the CLI can run it by hand) that
does its work in one transaction guarded by a transaction-scoped advisory lock, so
that across any number of scheduler replicas a job runs at most once at a time."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import structlog

from payflow.broker.topology import TOPIC_LEDGER_EVENT
from payflow.config import Settings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.ledger.states import EventStatus, transition
from payflow.ops.dlq import record_dead_letter
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.ops")
log = structlog.get_logger("payflow.ops")

RECOVERY_BATCH = 200


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What one recovery pass did."""

    recovered: int = 0
    dead_lettered: int = 0
    skipped: bool = False  # another replica holds the job's lock


async def job_lock(conn: Connection, job: str) -> bool:
    """Take the job's transaction-scoped advisory lock; False when another replica has it."""
    return bool(await conn.fetchval(SQL["try_job_lock"], job))


async def recover_stale_events(pool: asyncpg.Pool, settings: Settings) -> RecoveryReport:
    """Put events stuck in `enqueued` past the timeout back to pending (retry_count+1)
    with a fresh `ledger.event` outbox row; at the maximum, fail them into the DLQ.

    Invariant: statuses move only through `transition()`; each event's move, its retry
    count and its outbox row (or DLQ row) commit together.
    """
    recovered = dead = 0
    async with pool.acquire() as conn, transaction(conn, settings):
        if not await job_lock(conn, "recover_stale_events"):
            return RecoveryReport(skipped=True)
        rows = await conn.fetch(
            SQL["stale_enqueued_events"], settings.stale_event_timeout_s, RECOVERY_BATCH
        )
        for row in rows:
            event_id: str = row["event_id"]
            if row["retry_count"] >= settings.max_event_retries:
                moved = await transition(
                    conn, event_id, EventStatus.FAILED, expected=EventStatus.ENQUEUED
                )
                if moved.changed:
                    await record_dead_letter(
                        conn,
                        source="payment_event",
                        subject_id=event_id,
                        payload={"version": 1, "event_id": event_id},
                        error=f"exhausted recovery attempts ({settings.max_event_retries})",
                        attempt=row["retry_count"] + 1,
                    )
                    dead += 1
                continue
            moved = await transition(
                conn, event_id, EventStatus.PENDING, expected=EventStatus.ENQUEUED
            )
            if not moved.changed:
                continue
            await conn.execute(SQL["bump_retry_count"], event_id, "stale in enqueued; recovered")
            await enqueue(
                conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, row["trace_id"]
            )
            recovered += 1
        unfinished = await conn.fetch(
            SQL["stale_unfinished_events"], settings.stale_event_timeout_s
        )
    for row in unfinished:
        log.warning("payflow.events.stale", status=row["status"], count=row["stale"])
    if recovered or dead:
        log.warning("payflow.recovery.done", recovered=recovered, dead_lettered=dead)
    return RecoveryReport(recovered=recovered, dead_lettered=dead)
