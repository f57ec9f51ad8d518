"""The Redis DLQ drain: malformed entries set aside (never dropped), a stop after
consecutive failures that loses nothing, bounded batches taken oldest first."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import orjson
from redis.asyncio import Redis

from payflow.alerts import Severity
from payflow.config import Settings
from payflow.dlq.fallback import (
    FallbackEntry,
    fallback_key,
    malformed_key,
    processing_key,
    push_entry,
)
from payflow.jobs.spec import JobContext
from payflow.ops.dlq_drain import ALERT_DRAIN_FAILED, ALERT_MALFORMED, drain_redis_dlq
from tests.integration.dlq.conftest import RecordingAlerts, enqueued_event


def _event_entry(event_id: str) -> FallbackEntry:
    return FallbackEntry.new(
        source="payment_event",
        subject_id=event_id,
        payload={"version": 1, "event_id": event_id},
        error="RetryableError: down",
        attempt=4,
        trace_id=None,
    )


async def _dlq_subjects(pool: asyncpg.Pool) -> list[str]:
    rows = await pool.fetch("SELECT subject_id FROM dead_letter_queue ORDER BY id")
    return [r["subject_id"] for r in rows]


async def test_malformed_entries_are_set_aside_unchanged_counted_and_alerted(
    pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    event_id = await enqueued_event(pool, fb_settings)
    good = _event_entry(event_id)
    doc = orjson.loads(good.to_json())
    malformed = [
        b"not json at all",
        b"[1, 2, 3]",
        orjson.dumps({**doc, "version": 2, "entry_id": "v2"}),
        orjson.dumps({k: v for k, v in doc.items() if k != "error"} | {"entry_id": "no-err"}),
        orjson.dumps({**doc, "entry_id": "bad-src", "source": "ledger"}),
        orjson.dumps({**doc, "entry_id": "bad-attempt", "attempt": "4"}),
        orjson.dumps({**doc, "entry_id": "mismatch", "subject_id": "someone-else"}),
    ]
    key = fallback_key(fb_settings)
    await redis.lpush(key, malformed[0], malformed[1], malformed[2])
    await push_entry(redis, fb_settings, good, redis_settings=fb_settings)
    await redis.lpush(key, *malformed[3:])
    alerts = RecordingAlerts()

    result = await drain_redis_dlq(JobContext(pool, fb_settings, alerts, redis))

    assert result.outcome == "alert"
    assert result.summary.startswith("moved 1, settled 0, duplicates 0, set aside 7")
    assert await _dlq_subjects(pool) == [event_id]
    # Oldest first in, so the malformed list (LPUSH) holds them newest first, byte for byte.
    kept = await redis.lrange(malformed_key(fb_settings), 0, -1)
    assert list(reversed(kept)) == malformed
    assert await redis.ttl(malformed_key(fb_settings)) == -1  # no TTL: never dropped
    assert await redis.llen(key) == 0
    assert await redis.llen(processing_key(fb_settings)) == 0
    assert [(k, s) for k, s, _ in alerts.fired] == [(ALERT_MALFORMED, Severity.WARNING)]
    assert "7 Redis DLQ entries set aside" in alerts.fired[0][2]


async def test_drain_stops_after_consecutive_failures_and_loses_nothing(
    pool: asyncpg.Pool,
    dead_pool: asyncpg.Pool,
    fb_settings: Settings,
    make_settings: Callable[..., Settings],
    redis: Redis,
) -> None:
    settings = make_settings(dlq_drain_max_failures=2)
    events = [await enqueued_event(pool, settings) for _ in range(3)]
    for event_id in events:
        await push_entry(redis, settings, _event_entry(event_id), redis_settings=settings)
    alerts = RecordingAlerts()

    stopped = await drain_redis_dlq(JobContext(dead_pool, settings, alerts, redis))

    assert stopped.outcome == "alert"
    assert stopped.summary == (
        "moved 0, settled 0, duplicates 0, set aside 0, failures 2; 3 left"
        " (stopped after consecutive failures)"
    )
    assert [(k, s) for k, s, _ in alerts.fired] == [(ALERT_DRAIN_FAILED, Severity.CRITICAL)]
    left = await redis.lrange(fallback_key(settings), 0, -1)
    left += await redis.lrange(processing_key(settings), 0, -1)
    assert sorted(FallbackEntry.from_json(raw).subject_id for raw in left) == sorted(events)
    assert await _dlq_subjects(pool) == []

    recovered = await drain_redis_dlq(JobContext(pool, settings, alerts, redis))

    assert recovered.outcome == "ok"
    assert recovered.summary.startswith("moved 3")
    assert await _dlq_subjects(pool) == events  # oldest first
    assert alerts.resolved == [ALERT_DRAIN_FAILED]


async def test_drain_moves_a_bounded_batch_oldest_first(
    pool: asyncpg.Pool,
    fb_settings: Settings,
    make_settings: Callable[..., Settings],
    redis: Redis,
) -> None:
    settings = make_settings(dlq_drain_batch=2)
    events = [await enqueued_event(pool, settings) for _ in range(3)]
    for event_id in events:
        await push_entry(redis, settings, _event_entry(event_id), redis_settings=settings)
    ctx = JobContext(pool, settings, RecordingAlerts(), redis)

    first = await drain_redis_dlq(ctx)

    assert first.summary.endswith("; 1 left")
    assert await _dlq_subjects(pool) == events[:2]
    await drain_redis_dlq(ctx)
    assert await _dlq_subjects(pool) == events


async def test_an_event_finished_meanwhile_is_settled_without_a_row(
    pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    """The ledger sweep re-announced the event while PostgreSQL was back and it was
    posted before the drain ran: as on_dead decides, nothing is dead-lettered."""
    event_id = await enqueued_event(pool, fb_settings)
    await pool.execute(
        "UPDATE payment_events SET status = 'confirmed' WHERE event_id = $1", event_id
    )
    await push_entry(redis, fb_settings, _event_entry(event_id), redis_settings=fb_settings)

    result = await drain_redis_dlq(JobContext(pool, fb_settings, RecordingAlerts(), redis))

    assert result.summary.startswith("moved 0, settled 1")
    assert await _dlq_subjects(pool) == []
    assert await redis.llen(fallback_key(fb_settings)) == 0


async def test_drain_without_redis_is_skipped(pool: asyncpg.Pool, fb_settings: Settings) -> None:
    result = await drain_redis_dlq(JobContext(pool, fb_settings, RecordingAlerts(), None))
    assert (result.outcome, result.summary) == ("skipped", "no Redis client")
