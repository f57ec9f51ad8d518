"""The Redis DLQ drain job as the scheduler and `payflow jobs run` call it: the
machinery's `drain_fallback` (`payflow.dlq.drain`, where the protocol is described) with
the dead-letterer each domain exports for its source, as `dlq_replay.py` wires replay."""

from __future__ import annotations

import asyncpg

from payflow.config import DatabaseSettings, DlqSettings, RedisSettings
from payflow.dlq.drain import ALERT_DRAIN_FAILED, ALERT_MALFORMED, DeadLetterer, drain_fallback
from payflow.dlq.drain import move_entry as move_with
from payflow.dlq.fallback import FallbackEntry
from payflow.jobs.spec import JobContext, JobResult
from payflow.ledger import EVENT_DEAD_LETTERER
from payflow.payments import PAYMENT_DEAD_LETTERER, PAYMENT_NOTE
from payflow.webhooks import WEBHOOK_DEAD_LETTERER
from payflow.webhooks.endpoints import ENDPOINT_DEAD_LETTERER

__all__ = [
    "ALERT_DRAIN_FAILED",
    "ALERT_MALFORMED",
    "DEAD_LETTERERS",
    "PAYMENT_NOTE",
    "drain_redis_dlq",
    "move_entry",
]

DEAD_LETTERERS: dict[str, DeadLetterer] = {
    "payment_event": EVENT_DEAD_LETTERER,
    "payment": PAYMENT_DEAD_LETTERER,
    "webhook": WEBHOOK_DEAD_LETTERER,
    "endpoint_delivery": ENDPOINT_DEAD_LETTERER,
}


async def move_entry(pool: asyncpg.Pool, settings: DatabaseSettings, entry: FallbackEntry) -> str:
    """Redo one entry's dead-lettering (see `payflow.dlq.drain.move_entry`): ``moved``,
    ``settled`` or ``duplicate``."""
    return await move_with(pool, settings, entry, DEAD_LETTERERS)


async def drain_redis_dlq(ctx: JobContext) -> JobResult:
    """Move up to `DLQ_DRAIN_BATCH` Redis fallback entries into `dead_letter_queue` (see
    `payflow.dlq.drain.drain_fallback`); ``skipped`` without a Redis client."""
    if ctx.redis is None:
        return JobResult("skipped", "no Redis client")
    return await drain_fallback(
        ctx.pool,
        ctx.redis,
        ctx.alerts,
        ctx.slice(DlqSettings),
        DEAD_LETTERERS,
        redis_settings=ctx.slice(RedisSettings),
        database=ctx.slice(DatabaseSettings),
    )
