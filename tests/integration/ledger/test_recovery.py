"""Recovery of stale events, the singleton guard, outbox maintenance and DLQ replay."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal

import asyncpg
import pytest
from structlog.testing import capture_logs

from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.dlq import list_dead_letters, record_dead_letter
from payflow.errors import Conflict
from payflow.jobs.lock import job_lock
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.records import EventType
from payflow.ledger.recovery import recover_stale_events
from payflow.ledger.states import EventStatus, transition
from payflow.ops.dlq_replay import replay_dead_letter
from payflow.outbox.maintenance import alert_stale_outbox, cleanup_outbox
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import wait_until


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
    report = await recover_stale_events(pool, pipe_settings, database=pipe_settings)
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


async def test_deposit_waiting_through_a_long_worker_outage_is_credited_once(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    start_roles,
) -> None:
    """Workers down, a deposit recorded, recovery run more than
    MAX_EVENT_RETRIES times (an hour and more at the defaults), then a worker: the
    deposit is credited exactly once, and nothing was failed or dead-lettered."""
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USD", Decimal(0))
    await start_roles(("relay",))  # the broker takes the messages; no worker consumes
    await submitter.submit_deposit("outage-1", account.id, "12.34")
    runs = pipe_settings.max_event_retries + 2
    waiting = 0
    for run in range(1, runs + 1):
        await wait_until(
            lambda: pool.fetchval(
                "SELECT status = 'enqueued' FROM payment_events WHERE event_id = 'outage-1'"
            ),
            what="event published by the relay",
        )
        # Past any wait of the doubling back-off (capped at SWEEP_MAX_BACKOFF_S).
        await owner_pool.execute(
            "UPDATE payment_events SET updated_at = now() - make_interval(secs => $1) "
            "WHERE event_id = 'outage-1'",
            pipe_settings.sweep_max_backoff_s + 60,
        )
        with capture_logs() as logs:
            report = await recover_stale_events(pool, pipe_settings, database=pipe_settings)
        assert report.recovered == 1
        alerts = [e for e in logs if e["event"] == "payflow.events.waiting"]
        if run >= pipe_settings.max_event_retries:
            assert [(a["event_id"], a["announcements"]) for a in alerts] == [("outage-1", run)]
        else:
            assert alerts == []
        waiting += report.waiting
        row = await pool.fetchrow(
            "SELECT status, retry_count FROM payment_events WHERE event_id = 'outage-1'"
        )
        # Re-announced: back to pending, and the running relay may already have
        # published it again (enqueued) by the time this reads it.
        assert row["retry_count"] == run
        assert row["status"] in ("pending", "enqueued")
    # Alerted (payflow.events.waiting) from the MAX_EVENT_RETRIES-th re-announcement on.
    assert waiting == runs - pipe_settings.max_event_retries + 1
    await start_roles(("worker",))
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = 'outage-1'"
        ),
        what="deposit confirmed after the outage",
    )
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id) == (
        Decimal("12.34")
    )
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM balance_events WHERE source_event_id = 'outage-1'"
        )
        == 1
    )
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_recovery_waits_longer_after_each_reannouncement(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    """The wait is min(STALE_EVENT_TIMEOUT_S * 2^retry_count, SWEEP_MAX_BACKOFF_S)."""
    await _stale_enqueued_event(pool, pipe_settings, "slow-1", retry_count=3)
    wait = pipe_settings.stale_event_timeout_s * 2**3  # 40 minutes at the default
    await owner_pool.execute(
        "UPDATE payment_events SET updated_at = now() - make_interval(secs => $1) "
        "WHERE event_id = 'slow-1'",
        wait - 60,
    )
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 0
    await owner_pool.execute(
        "UPDATE payment_events SET updated_at = now() - make_interval(secs => $1) "
        "WHERE event_id = 'slow-1'",
        wait + 60,
    )
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 1
    row = await pool.fetchrow(
        "SELECT status, retry_count FROM payment_events WHERE event_id = 'slow-1'"
    )
    assert (row["status"], row["retry_count"]) == ("pending", 4)
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 1


async def test_pending_event_whose_announcement_is_gone_is_reannounced_once(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    start_roles,
) -> None:
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USD", Decimal(0))
    await submitter.submit_deposit("orphan-1", account.id, "5.00")
    old = "now() - interval '1 hour'"
    await owner_pool.execute(f"UPDATE payment_events SET created_at = {old}, updated_at = {old}")
    # Its ledger.event row still waits for the relay: nothing to re-announce.
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 0
    # The row was published but the event never moved (or retention removed it).
    await owner_pool.execute("DELETE FROM outbox")
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 1
    await owner_pool.execute(f"UPDATE payment_events SET updated_at = {old}")
    # The fresh row is unpublished: a second tick adds nothing.
    assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).recovered == 0
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 1
    await start_roles()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'confirmed' FROM payment_events WHERE event_id = 'orphan-1'"
        ),
        what="orphaned event confirmed",
    )
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id) == (
        Decimal("5.00")
    )


async def test_failed_event_in_the_dlq_is_replayed_and_applied_once(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    account = await _stale_enqueued_event(pool, pipe_settings, "lost-2")
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        # What the ledger worker's own dead-lettering does for a reason about the event.
        await transition(conn, "lost-2", EventStatus.FAILED, expected=EventStatus.ENQUEUED)
        await record_dead_letter(
            conn,
            source="payment_event",
            subject_id="lost-2",
            payload={"version": 1, "event_id": "lost-2"},
            error="operator test",
            attempt=4,
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
        assert (await recover_stale_events(pool, pipe_settings, database=pipe_settings)).skipped


async def test_outbox_retention_deletes_only_old_published_rows_and_alerts_on_stale(
    pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    await pool.execute(
        "INSERT INTO outbox (topic, payload, created_at, published_at) VALUES "
        "('t', '{}', now() - interval '3 days', now() - interval '2 days'),"
        "('t', '{}', now() - interval '3 days', NULL),"
        "('t', '{}', now(), now())"
    )
    assert await cleanup_outbox(pool, pipe_settings, database=pipe_settings) == 1
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 2
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 1
    assert await alert_stale_outbox(pool, pipe_settings) == 1


async def test_stale_pending_and_processing_events_are_reported_by_status(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    """`payflow.events.stale` counts the unfinished events past the timeout per status
    (served by the partial indexes); fresh ones and confirmed ones are not counted."""
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USD", Decimal(0))
        for n in range(5):  # stale-2 becomes processing, stale-3 confirmed, stale-4 stays fresh
            await record_event(
                conn,
                event_id=f"stale-{n}",
                account_id=account.id,
                amount="1.00",
                event_type=EventType.DEPOSIT,
                scale=2,
            )
    await owner_pool.execute(
        "UPDATE payment_events SET status = CASE event_id WHEN 'stale-2' THEN 'processing'"
        " WHEN 'stale-3' THEN 'confirmed' ELSE status END,"
        " updated_at = now() - interval '1 hour' WHERE event_id <> 'stale-4'"
    )
    with capture_logs() as logs:
        await recover_stale_events(pool, pipe_settings, database=pipe_settings)
    stale = {e["status"]: e["count"] for e in logs if e["event"] == "payflow.events.stale"}
    assert stale == {"pending": 2, "processing": 1}
