"""The Redis DLQ fallback: how long dead letters recorded while PostgreSQL was unreachable
are kept, and how the drain moves them back (docs/operations.md)."""

from __future__ import annotations

from pydantic import Field

from payflow.config.base import Slice


class DlqSettings(Slice):
    """The `dlq` slice (`settings.dlq`); the module's docstring says what it covers."""

    slice_name = "dlq"

    # Redis DLQ fallback: where on_dead hooks park entries while PostgreSQL is
    # unreachable, and how the scheduler's drain moves them back.
    dlq_fallback_ttl_s: int = Field(default=7 * 24 * 3600, ge=60)
    """TTL (7 days by default) of the Redis list `<REDIS_KEY_PREFIX>dlq:fallback` that holds dead
    letters recorded while PostgreSQL was unreachable; refreshed by each push
    (docs/operations.md, "Redis DLQ fallback")."""
    dlq_drain_batch: int = Field(default=100, ge=1, le=10000)
    """Entries the `drain_redis_dlq` job moves back into `dead_letter_queue` per run,
    oldest first."""
    dlq_drain_max_failures: int = Field(default=3, ge=1)
    """Consecutive failed entries after which the drain stops and alerts
    `dlq.fallback.drain_failed`."""
