"""Recovery of stale events, the singleton guard, outbox maintenance and DLQ replay."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
import pytest

from payflow.bench.sink import WebhookSink
from payflow.bench.submit import DirectSubmitter
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.errors import Conflict
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.records import EventType
from payflow.ledger.states import EventStatus, transition
from payflow.ops.dlq import list_dead_letters, replay_dead_letter
from payflow.ops.recovery import job_lock, recover_stale_events
from payflow.outbox.maintenance import alert_stale_outbox, cleanup_outbox
from tests.integration.pipeline.conftest import wait_until


async def _stale_enqueued_event(
    pool: asyncpg.Pool, settings: Settings, event_id: str, retry_count: int = 0
) -> uuid.UUID:
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USD", Decimal(0))
        await record_event(
            conn,
            event_id=event_id,
            account_id=account.id,
            amount="7.00",
            event_type=EventType.DEPOSIT,
            scale=2,
        )
        await transition(conn, event_id, EventStatus.ENQUEUED)
        await conn.execute(
            "UPDATE payment_events SET updated_at = now() - interval '1 hour', retry_count = $2 "
            "WHERE event_id = $1",
            event_id,
            retry_count,
        )
    return account.id


async def test_stale_enqueued_event_goes_back_to_pending_and_completes(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    account = await _stale_enqueued_event(pool, pipe_settings, "lost-1")
    report = await recover_stale_events(pool, pipe_settings)
    assert report.recovered == 1
    row = await pool.fetchrow(
        "SELECT status, retry_count FROM payment_events WHERE event_id = 'lost-1'"
    )
    assert (row["status"], row["retry_count"]) == ("pending", 1)
    running = await start_roles()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = 'lost-1'"
        ),
        what="recovered event confirmed",
    )
    await running.stop()
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == Decimal(
        "7.00"
    )


async def test_event_at_max_retries_fails_into_the_dlq_and_replay_applies_it_once(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    account = await _stale_enqueued_event(
        pool, pipe_settings, "lost-2", retry_count=pipe_settings.max_event_retries
    )
    report = await recover_stale_events(pool, pipe_settings)
    assert report.dead_lettered == 1
    assert await pool.fetchval("SELECT status FROM payment_events WHERE event_id = 'lost-2'") == (
        "failed"
    )
    [dead] = await list_dead_letters(pool)
    assert (dead.source, dead.subject_id) == ("payment_event", "lost-2")

    running = await start_roles()
    resolution = await replay_dead_letter(pool, pipe_settings, dead.id, operator="alice")
    assert resolution.startswith("requeued")
    with pytest.raises(Conflict):
        await replay_dead_letter(pool, pipe_settings, dead.id, operator="bob")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = 'lost-2'"
        ),
        what="replayed event confirmed",
    )
    await running.stop()
    audited = await pool.fetchrow("SELECT * FROM dead_letter_queue WHERE id = $1", dead.id)
    assert audited["resolved_by"] == "alice"
    assert audited["resolved_at"] is not None
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == Decimal(
        "7.00"
    )


async def test_replay_of_an_applied_event_applies_nothing(
    pool: asyncpg.Pool, pipe_settings: Settings, submitter: DirectSubmitter, start_roles
) -> None:
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USD", Decimal(0))
    running = await start_roles()
    await submitter.submit_deposit("done-1", account.id, "1.00")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = 'done-1'"
        ),
        what="deposit confirmed",
    )
    async with pool.acquire() as conn:
        dlq_id = await conn.fetchval(
            "INSERT INTO dead_letter_queue (source, subject_id, error, attempt) "
            "VALUES ('payment_event', 'done-1', 'operator test', 1) RETURNING id"
        )
    resolution = await replay_dead_letter(pool, pipe_settings, dlq_id, operator="carol")
    await asyncio.sleep(0.3)
    await running.stop()
    assert resolution.startswith("already applied")
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1


async def test_webhook_dlq_replay_redelivers_with_the_same_webhook_id(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    sink.status_for = lambda _r: 503
    running = await start_roles()
    payment_id = await submitter.submit_payment(merchant[0], "3.00", "USD", "k-r", sink.url)
    dlq_id = await wait_until(
        lambda: pool.fetchval(
            "SELECT id FROM dead_letter_queue WHERE source = 'webhook' AND subject_id = $1",
            str(payment_id),
        ),
        what="webhook dead letter",
    )
    sink.status_for = lambda _r: 200
    resolution = await replay_dead_letter(pool, pipe_settings, dlq_id, operator="dave")
    assert resolution.startswith("requeued")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivered after replay",
    )
    await running.stop()
    assert len({r.headers["webhook-id"] for r in sink.received}) == 1
    assert (
        await pool.fetchval("SELECT webhook_attempts FROM payments WHERE id = $1", payment_id) == 5
    )
    again = await pool.fetchval(
        "INSERT INTO dead_letter_queue (source, subject_id, error, attempt) "
        "VALUES ('webhook', $1, 'again', 1) RETURNING id",
        str(payment_id),
    )
    assert (await replay_dead_letter(pool, pipe_settings, again, operator="dave")).startswith(
        "already delivered"
    )


async def test_job_lock_admits_one_replica_at_a_time(
    pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    async with pool.acquire() as first, transaction(first, pipe_settings):
        assert await job_lock(first, "recover_stale_events")
        async with pool.acquire() as second, transaction(second, pipe_settings):
            assert not await job_lock(second, "recover_stale_events")
            assert await job_lock(second, "cleanup_outbox")
        assert (await recover_stale_events(pool, pipe_settings)).skipped


async def test_outbox_retention_deletes_only_old_published_rows_and_alerts_on_stale(
    pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    await pool.execute(
        "INSERT INTO outbox (topic, payload, created_at, published_at) VALUES "
        "('t', '{}', now() - interval '3 days', now() - interval '2 days'),"
        "('t', '{}', now() - interval '3 days', NULL),"
        "('t', '{}', now(), now())"
    )
    assert await cleanup_outbox(pool, pipe_settings) == 1
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 2
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 1
    assert await alert_stale_outbox(pool, pipe_settings) == 1
