"""The Redis DLQ drain and lost sessions: an entry whose move loses its session stays
for the next run (never set aside as refused for good), and an entry refused after its
row was committed counts as a duplicate, not as refused."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.dlq import drain as dlq_drain
from payflow.dlq.fallback import (
    FallbackEntry,
    fallback_key,
    malformed_key,
    processing_key,
    push_entry,
)
from payflow.jobs.spec import JobContext
from payflow.ops.dlq_drain import drain_redis_dlq
from tests.conftest import APP_ROLE
from tests.integration.dlq.conftest import RecordingAlerts, enqueued_event

LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('payflow.dlq.fallback:' || $1, 0))"


def _entry(event_id: str) -> FallbackEntry:
    return FallbackEntry.new(
        source="payment_event",
        subject_id=event_id,
        payload={"version": 1, "event_id": event_id},
        error="RetryableError: down",
        attempt=4,
        trace_id=None,
    )


async def _entries_left(redis: Redis, settings: Settings) -> int:
    return int(await redis.llen(fallback_key(settings))) + int(
        await redis.llen(processing_key(settings))
    )


async def test_an_entry_whose_session_is_lost_stays_for_the_next_run(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    event_id = await enqueued_event(pool, fb_settings)
    entry = _entry(event_id)
    await push_entry(redis, fb_settings, entry, redis_settings=fb_settings)
    alerts = RecordingAlerts()
    async with owner_pool.acquire() as holder:
        # The drain's move waits on the entry's lock, in its transaction, until its
        # session is terminated under it.
        locked = holder.transaction()
        await locked.start()
        await holder.execute(LOCK, entry.entry_id)
        run = asyncio.create_task(drain_redis_dlq(JobContext(pool, fb_settings, alerts, redis)))
        pid = None
        for _ in range(200):
            pid = await owner_pool.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE usename = $1"
                " AND datname = current_database() AND wait_event_type = 'Lock' LIMIT 1",
                APP_ROLE,
            )
            if pid is not None:
                break
            await asyncio.sleep(0.05)
        assert pid is not None, "the drain never waited on the entry's lock"
        assert await owner_pool.fetchval("SELECT pg_terminate_backend($1)", pid)
        lost = await asyncio.wait_for(run, 30)
        await locked.rollback()
    # Lost, then (the lock still held) lock timeouts: failures all, never set aside.
    assert lost.summary.startswith("moved 0, settled 0, duplicates 0, set aside 0,"), lost
    assert await redis.llen(malformed_key(fb_settings)) == 0
    assert await _entries_left(redis, fb_settings) == 1
    again = await drain_redis_dlq(JobContext(pool, fb_settings, alerts, redis))
    assert again.summary.startswith("moved 1,"), again.summary
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1
    assert await _entries_left(redis, fb_settings) == 0


async def test_a_refusal_after_the_commit_counts_the_entry_as_a_duplicate(
    pool: asyncpg.Pool, fb_settings: Settings, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    event_id = await enqueued_event(pool, fb_settings)
    await push_entry(redis, fb_settings, _entry(event_id), redis_settings=fb_settings)
    real_move = dlq_drain.move_entry

    async def committed_then_refused(*args: object, **kwargs: object) -> str:
        await real_move(*args, **kwargs)  # type: ignore[arg-type]  # the real move commits
        raise asyncpg.UndefinedTableError("refused after the commit")  # its answer: lost

    monkeypatch.setattr(dlq_drain, "move_entry", committed_then_refused)
    result = await drain_redis_dlq(JobContext(pool, fb_settings, RecordingAlerts(), redis))
    assert result.summary.startswith("moved 0, settled 0, duplicates 1, set aside 0"), result
    assert await redis.llen(malformed_key(fb_settings)) == 0
    assert await _entries_left(redis, fb_settings) == 0
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1
