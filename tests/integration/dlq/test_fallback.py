"""The Redis DLQ fallback: PostgreSQL unreachable (a pool on a closed port) at the moment
of dead-lettering, on the real Redis and the real PostgreSQL; then the drain."""

from __future__ import annotations

import asyncpg
import httpx
import orjson
import pytest
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.dlq.fallback import (
    DlqFallback,
    FallbackEntry,
    fallback_key,
    is_database_unavailable,
    processing_key,
)
from payflow.errors import RetryableError
from payflow.jobs.spec import JobContext
from payflow.ledger.worker import LedgerWorker
from payflow.ops.dlq_drain import PAYMENT_NOTE, drain_redis_dlq, move_entry
from payflow.payments.charges import Claim, claim_charge
from payflow.payments.processor import PaymentProcessor
from payflow.webhooks.sender import WebhookSender
from tests.integration.dlq.conftest import (
    NoGateway,
    RecordingAlerts,
    enqueued_event,
    envelope,
    pending_payment,
)

SEVEN_DAYS_S = 7 * 24 * 3600


async def _dead_letters(pool: asyncpg.Pool, subject: str) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT * FROM dead_letter_queue WHERE subject_id = $1 ORDER BY id", subject
    )


async def test_ledger_dead_letter_goes_to_redis_and_drains_exactly_once(
    pool: asyncpg.Pool, dead_pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    event_id = await enqueued_event(pool, fb_settings)
    worker = LedgerWorker(
        dead_pool, fb_settings, DlqFallback(redis, fb_settings, redis_settings=fb_settings)
    )

    await worker.on_dead(
        envelope({"version": 1, "event_id": event_id}, attempt=4, trace_id="t-ledger"),
        RetryableError("lock timeout"),
    )

    key = fallback_key(fb_settings)
    assert await redis.llen(key) == 1
    assert 0 < await redis.ttl(key) <= SEVEN_DAYS_S
    entry = FallbackEntry.from_json(await redis.lindex(key, 0))
    assert (entry.source, entry.subject_id, entry.attempt, entry.trace_id) == (
        "payment_event",
        event_id,
        4,
        "t-ledger",
    )
    assert entry.payload == {"version": 1, "event_id": event_id}
    assert entry.error == "RetryableError: lock timeout"
    # PostgreSQL was not reachable: nothing of the hook's transaction happened.
    assert await _dead_letters(pool, event_id) == []
    status = await pool.fetchval("SELECT status FROM payment_events WHERE event_id = $1", event_id)
    assert status == "enqueued"

    alerts = RecordingAlerts()
    ctx = JobContext(pool, fb_settings, alerts, redis)
    first = await drain_redis_dlq(ctx)
    second = await drain_redis_dlq(ctx)

    assert first.outcome == "ok"
    assert first.summary.startswith("moved 1, settled 0, duplicates 0, set aside 0")
    assert second.summary.startswith("moved 0, settled 0, duplicates 0, set aside 0")
    rows = await _dead_letters(pool, event_id)
    assert len(rows) == 1
    row = rows[0]
    assert (row["source"], row["attempt"], row["error"]) == (
        "payment_event",
        4,
        "RetryableError: lock timeout",
    )
    assert row["payload"]["event_id"] == event_id
    assert row["payload"]["_dlq_fallback"]["entry_id"] == entry.entry_id
    status = await pool.fetchval("SELECT status FROM payment_events WHERE event_id = $1", event_id)
    assert status == "failed"  # what on_dead would have done with the database up
    assert await redis.llen(key) == 0
    assert await redis.llen(processing_key(fb_settings)) == 0
    assert alerts.fired == []


async def test_crash_between_insert_and_removal_never_duplicates_the_row(
    pool: asyncpg.Pool, dead_pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    payment_id = await pending_payment(pool, fb_settings)
    processor = PaymentProcessor(
        dead_pool,
        fb_settings,
        NoGateway(),  # type: ignore[arg-type]
        DlqFallback(redis, fb_settings, redis_settings=fb_settings),
        database=fb_settings,
    )
    await processor.on_dead(
        envelope({"version": 1, "payment_id": str(payment_id)}), RetryableError("boom")
    )
    # A drain that died after its commit and before LREM: the entry sits in the
    # processing list and its row is committed.
    raw = await redis.lmove(fallback_key(fb_settings), processing_key(fb_settings), "RIGHT", "LEFT")
    assert raw is not None
    assert await move_entry(pool, fb_settings, FallbackEntry.from_json(raw)) == "moved"
    assert len(await _dead_letters(pool, str(payment_id))) == 1

    ctx = JobContext(pool, fb_settings, RecordingAlerts(), redis)
    result = await drain_redis_dlq(ctx)
    again = await drain_redis_dlq(ctx)

    assert result.summary.startswith("moved 0, settled 0, duplicates 1")
    assert again.summary.startswith("moved 0, settled 0, duplicates 0")
    rows = await _dead_letters(pool, str(payment_id))
    assert len(rows) == 1
    assert (rows[0]["source"], rows[0]["attempt"]) == ("payment", 4)
    # No charge attempt was ever claimed: the gateway was never asked, failing is safe.
    status = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    assert status == "failed"
    assert await redis.llen(processing_key(fb_settings)) == 0


async def test_webhook_dead_letter_is_redone_by_the_drain(
    pool: asyncpg.Pool, dead_pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    payment_id = await pending_payment(pool, fb_settings)
    await pool.execute(
        "UPDATE payments SET status = 'failed', processed_at = now() WHERE id = $1", payment_id
    )
    async with httpx.AsyncClient() as client:
        sender = WebhookSender(
            dead_pool,
            fb_settings,
            client,
            DlqFallback(redis, fb_settings, redis_settings=fb_settings),
            database=fb_settings,
            pipeline=fb_settings,
            broker=fb_settings,
        )
        await sender.on_dead(
            envelope({"version": 1, "payment_id": str(payment_id)}, attempt=4),
            RetryableError("receiver answered HTTP 503"),
        )
    assert await redis.llen(fallback_key(fb_settings)) == 1

    result = await drain_redis_dlq(JobContext(pool, fb_settings, RecordingAlerts(), redis))

    assert result.summary.startswith("moved 1")
    rows = await _dead_letters(pool, str(payment_id))
    # The job was tried 4 times though no POST was counted on the payment: its tries count.
    assert [(r["source"], r["attempt"]) for r in rows] == [("webhook", 4)]
    dead_at = await pool.fetchval("SELECT webhook_dead_at FROM payments WHERE id = $1", payment_id)
    assert dead_at is not None  # the webhook sweep leaves it alone, as on_dead would


async def test_both_stores_down_the_hook_raises_so_the_message_stays_unacked(
    pool: asyncpg.Pool,
    dead_pool: asyncpg.Pool,
    dead_redis: Redis,
    fb_settings: Settings,
    redis: Redis,
) -> None:
    event_id = await enqueued_event(pool, fb_settings)
    worker = LedgerWorker(
        dead_pool, fb_settings, DlqFallback(dead_redis, fb_settings, redis_settings=fb_settings)
    )

    with pytest.raises(Exception) as raised:
        await worker.on_dead(envelope({"version": 1, "event_id": event_id}), RetryableError("x"))

    assert is_database_unavailable(raised.value)  # the database error, chained to Redis's
    assert raised.value.__cause__ is not None
    assert await redis.llen(fallback_key(fb_settings)) == 0
    assert await _dead_letters(pool, event_id) == []


async def test_a_constraint_error_never_falls_back_to_redis(
    pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    async def write() -> None:
        await pool.execute(
            "INSERT INTO dead_letter_queue (source, subject_id, payload, error, attempt)"
            " VALUES ('payment_event', 'x', '{}', 'e', 0)"
        )

    with pytest.raises(asyncpg.CheckViolationError):
        await DlqFallback(redis, fb_settings, redis_settings=fb_settings).record(
            write,
            source="payment_event",
            subject_id="x",
            payload={},
            error="e",
            attempt=1,
            trace_id=None,
        )
    assert await redis.llen(fallback_key(fb_settings)) == 0


@pytest.mark.parametrize(
    ("exc", "unavailable"),
    [
        (ConnectionRefusedError(111, "refused"), True),
        (TimeoutError(), True),
        (asyncpg.ConnectionDoesNotExistError("closed"), True),
        (asyncpg.CannotConnectNowError("starting"), True),
        (asyncpg.TooManyConnectionsError("full"), True),
        (asyncpg.LockNotAvailableError("lock timeout"), False),
        (asyncpg.DeadlockDetectedError("deadlock"), False),
        (asyncpg.UniqueViolationError("dup"), False),
        (asyncpg.CheckViolationError("check"), False),
        (ValueError("bug"), False),
    ],
)
def test_only_connection_class_failures_count_as_unavailable(
    exc: BaseException, unavailable: bool
) -> None:
    assert is_database_unavailable(exc) is unavailable


def test_entry_document_round_trips() -> None:
    entry = FallbackEntry.new(
        source="webhook",
        subject_id="p",
        payload={"payment_id": "p"},
        error="e",
        attempt=3,
        trace_id="t",
    )
    doc = orjson.loads(entry.to_json())
    assert set(doc) == {
        "version",
        "entry_id",
        "source",
        "subject_id",
        "payload",
        "error",
        "attempt",
        "trace_id",
        "failed_at",
    }
    assert doc["version"] == 1
    assert FallbackEntry.from_json(entry.to_json()) == entry


async def test_drained_payment_with_an_unanswered_charge_is_parked_for_review_not_failed(
    pool: asyncpg.Pool, dead_pool: asyncpg.Pool, fb_settings: Settings, redis: Redis
) -> None:
    """The drain asks no gateway: a payment whose charge was claimed and never answered
    may have been charged, so it stays pending with its attempt `needs_review`."""
    payment_id = await pending_payment(pool, fb_settings)
    async with pool.acquire() as conn, transaction(conn, fb_settings):
        claim = await claim_charge(conn, payment_id, "worker-that-died", 10.0)
    assert isinstance(claim, Claim)
    processor = PaymentProcessor(
        dead_pool,
        fb_settings,
        NoGateway(),  # type: ignore[arg-type]
        DlqFallback(redis, fb_settings, redis_settings=fb_settings),
        database=fb_settings,
    )
    await processor.on_dead(
        envelope({"version": 1, "payment_id": str(payment_id)}), RetryableError("gateway down")
    )

    result = await drain_redis_dlq(JobContext(pool, fb_settings, RecordingAlerts(), redis))

    assert result.summary.startswith("moved 1")
    status = await pool.fetchval("SELECT status FROM payments WHERE id = $1", payment_id)
    assert status == "pending"
    attempt = await pool.fetchrow(
        "SELECT state, reason FROM charge_attempts WHERE payment_id = $1", payment_id
    )
    assert attempt["state"] == "needs_review"
    assert attempt["reason"].startswith(PAYMENT_NOTE)
    assert [r["source"] for r in await _dead_letters(pool, str(payment_id))] == ["payment"]
