"""Retention of posting claims (`processed_events`).

The service's role has no DELETE on `processed_events`: a deleted claim would let an
event post twice. Old claims go only through `cleanup_processed_events()` (migration
0009), a SECURITY DEFINER function that deletes terminal outcomes (never `pending`) of
terminal events older than at least 14 days, in a bounded batch with SKIP LOCKED.
"""

from __future__ import annotations

import asyncpg
import structlog

from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.ops.recovery import job_lock

SQL = load_queries("payflow.ledger")
log = structlog.get_logger("payflow.ledger")

RETENTION_BATCH = 5000


async def cleanup_processed_events(pool: asyncpg.Pool, settings: Settings) -> int:
    """One bounded batch of claim retention (a scheduler job, also callable by hand).

    Deletes claims older than PROCESSED_EVENTS_RETENTION_DAYS (the function never goes
    below 14 days); 0 disables it. Returns the number of claims deleted.
    """
    days = settings.processed_events_retention_days
    if days <= 0:
        return 0
    async with pool.acquire() as conn, transaction(conn, settings):
        if not await job_lock(conn, "cleanup_processed_events"):
            return 0
        deleted = int(await conn.fetchval(SQL["cleanup_processed_events"], days, RETENTION_BATCH))
    if deleted:
        log.info("payflow.ledger.claims_cleaned", deleted=deleted, retention_days=days)
    return deleted
