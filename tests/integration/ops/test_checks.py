"""The money checks, each on a database prepared to trigger it and on a clean one."""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from payflow.alerts import Severity
from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.jobs.spec import JobContext, JobResult, Outcome
from payflow.ledger.posting import post_event, posting_key
from payflow.ledger.records import EventType
from payflow.metrics import REGISTRY
from payflow.ops.scheduler import run_job
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.ledger.helpers import balance, new_account, new_event
from tests.integration.ops.conftest import RecordingSink


def _metric(name: str, kind: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"kind": kind})


async def _posted_account(pool: asyncpg.Pool, settings: Settings, event_id: str) -> object:
    account = await new_account(pool, settings)
    await new_event(pool, settings, account, event_id, "1.5", EventType.DEPOSIT)
    await post_event(pool, settings, event_id)
    return account


async def test_recon_hot_fires_on_a_tampered_balance_and_resolves_when_fixed(
    ctx: JobContext, pool: asyncpg.Pool, owner_pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    account = await _posted_account(pool, ctx.settings, "dep-hot")
    run = await run_job(ctx, "recon_hot")
    assert run is not None and run.result.outcome == Outcome.OK
    assert sink.fired == [] and sink.resolved == ["recon.mismatch:hot"]
    assert _metric("payflow_recon_mismatches", "hot") == 0

    await owner_pool.execute("UPDATE accounts SET balance = balance + 1 WHERE id = $1", account)
    run = await run_job(ctx, "recon_hot")
    assert run is not None and run.result.outcome == Outcome.ALERT
    assert "mismatches=1" in run.result.summary
    [(key, severity, _message, details)] = sink.fired
    assert (key, severity) == ("recon.mismatch:hot", Severity.CRITICAL)
    assert details["accounts"] == [str(account)]
    assert (details["balances"], details["expected"]) == (["2.5"], ["1.5"])
    assert _metric("payflow_recon_mismatches", "hot") == 1
    stamped = _metric("payflow_recon_last_success_timestamp_seconds", "hot")

    await owner_pool.execute("UPDATE accounts SET balance = balance - 1 WHERE id = $1", account)
    assert await balance(pool, account) == Decimal("1.5")
    run = await run_job(ctx, "recon_hot")
    assert run is not None and run.result.outcome == Outcome.OK
    assert sink.resolved[-1] == "recon.mismatch:hot"
    assert _metric("payflow_recon_mismatches", "hot") == 0
    assert (_metric("payflow_recon_last_success_timestamp_seconds", "hot") or 0) >= (stamped or 0)
    outcomes = [r[0] for r in await pool.fetch("SELECT outcome FROM job_runs ORDER BY id")]
    assert outcomes == ["ok", "alert", "ok"]


async def test_recon_full_finds_a_confirmed_event_without_a_ledger_row(
    ctx: JobContext, pool: asyncpg.Pool, owner_pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    await _posted_account(pool, ctx.settings, "dep-full")
    run = await run_job(ctx, "recon_full")
    assert run is not None and run.result.outcome == Outcome.OK
    account = await new_account(pool, ctx.settings)
    await new_event(pool, ctx.settings, account, "dep-ghost", "3", EventType.DEPOSIT)
    await owner_pool.execute(
        "UPDATE payment_events SET status = 'confirmed' WHERE event_id = $1", "dep-ghost"
    )
    run = await run_job(ctx, "recon_full")
    assert run is not None and run.result.outcome == Outcome.ALERT
    assert "confirmed_without_ledger=1" in run.result.summary
    [(key, severity, _message, details)] = sink.fired
    assert (key, severity) == ("recon.mismatch:full", Severity.CRITICAL)
    assert details["confirmed_without_ledger"] == ["dep-ghost"]
    assert _metric("payflow_recon_mismatches", "full") == 1


async def test_zombies_are_counted_by_kind_and_resolved_once_gone(
    ctx: JobContext, pool: asyncpg.Pool, owner_pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    run = await run_job(ctx, "check_zombies")
    assert run is not None and run.result.outcome == Outcome.OK and sink.fired == []

    account = await new_account(pool, ctx.settings)
    for event_id in ("ev-processing", "ev-pending", "ev-enqueued", "ev-fresh"):
        await new_event(pool, ctx.settings, account, event_id, "1", EventType.DEPOSIT)
    await owner_pool.execute(
        "UPDATE payment_events SET status = 'processing', updated_at = now() - interval '6 min'"
        " WHERE event_id = 'ev-processing'"
    )
    await owner_pool.execute(
        "UPDATE payment_events SET created_at = now() - interval '16 min'"
        " WHERE event_id = 'ev-pending'"
    )
    await owner_pool.execute(
        "UPDATE payment_events SET status = 'enqueued', created_at = now() - interval '20 min'"
        " WHERE event_id = 'ev-enqueued'"
    )
    async with pool.acquire() as conn:
        merchant, _key, _secret = await create_merchant(conn, "shop", admin=False)
    submitter = DirectSubmitter(pool, ctx.settings)
    stuck = await submitter.submit_payment(merchant, "10.00", "USD", "k1", None)
    undelivered = await submitter.submit_payment(
        merchant, "11.00", "USD", "k2", "https://m.example/h"
    )
    await owner_pool.execute(
        "UPDATE payments SET created_at = now() - interval '31 min' WHERE id = $1", stuck
    )
    await owner_pool.execute(
        "UPDATE payments SET status = 'succeeded', processed_at = now() - interval '61 min'"
        " WHERE id = $1",
        undelivered,
    )

    run = await run_job(ctx, "check_zombies")
    assert run is not None and run.result.outcome == Outcome.ALERT
    assert run.result.summary == (
        "events_processing=1 events_waiting=2 payments_pending=1 webhooks_undelivered=1"
    )
    fired = {key: (severity, details["count"]) for key, severity, _m, details in sink.fired}
    assert fired == {
        "zombies:events_processing": (Severity.WARNING, 1),
        "zombies:events_waiting": (Severity.WARNING, 2),
        "zombies:payments_pending": (Severity.WARNING, 1),
        "zombies:webhooks_undelivered": (Severity.WARNING, 1),
    }

    await owner_pool.execute("UPDATE payment_events SET status = 'failed'")
    await owner_pool.execute(
        "UPDATE payments SET status = 'failed', processed_at = now() WHERE id = $1", stuck
    )
    await owner_pool.execute(
        "UPDATE payments SET webhook_delivered_at = now() WHERE id = $1", undelivered
    )
    sink.resolved.clear()
    run = await run_job(ctx, "check_zombies")
    assert run is not None and run.result.outcome == Outcome.OK
    assert sorted(sink.resolved) == sorted(fired)


async def test_dlq_growth_fires_above_ten_new_rows_in_an_hour(
    ctx: JobContext, pool: asyncpg.Pool, owner_pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    insert = (
        "INSERT INTO dead_letter_queue (source, subject_id, error, attempt, created_at)"
        " SELECT 'webhook', 's' || n, 'boom', 1, now() - $1::text::interval"
        " FROM generate_series(1, $2) AS n"
    )
    await owner_pool.execute(insert, "2 hours", 50)  # old rows do not count
    await owner_pool.execute(insert, "1 minute", 10)
    run = await run_job(ctx, "check_dlq_growth")
    assert run is not None and run.result.outcome == Outcome.OK
    assert run.result.summary == "created=10 window_s=3600" and sink.fired == []
    await owner_pool.execute(insert, "1 minute", 1)
    run = await run_job(ctx, "check_dlq_growth")
    assert run is not None and run.result.outcome == Outcome.ALERT
    assert [(k, s) for k, s, *_ in sink.fired] == [("dlq.growth", Severity.WARNING)]


async def test_a_claim_pending_for_ten_minutes_is_a_critical_alert(
    ctx: JobContext, pool: asyncpg.Pool, owner_pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    account = await new_account(pool, ctx.settings)
    for event_id, age in (("ev-stuck", "11 min"), ("ev-young", "9 min")):
        await new_event(pool, ctx.settings, account, event_id, "1", EventType.DEPOSIT)
        await owner_pool.execute(
            "INSERT INTO processed_events (idempotency_key, event_id, outcome, created_at)"
            " VALUES ($1, $2, 'pending', now() - $3::text::interval)",
            posting_key(event_id),
            event_id,
            age,
        )
    run = await run_job(ctx, "check_stuck_claims")
    assert run is not None and run.result.outcome == Outcome.ALERT
    [(key, severity, _message, details)] = sink.fired
    assert (key, severity, details["count"]) == ("claims.stuck", Severity.CRITICAL, 1)
    assert details["examples"] == [posting_key("ev-stuck")]
    await owner_pool.execute("UPDATE processed_events SET outcome = 'success'")
    run = await run_job(ctx, "check_stuck_claims")
    assert run is not None and run.result.outcome == Outcome.OK
    assert sink.resolved == ["claims.stuck"]


async def test_claim_retention_runs_in_batches_and_never_deletes_a_pending_claim(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    account = await new_account(pool, settings)
    claims = [(f"old-{n}", "success", "confirmed", 100) for n in range(5)]
    claims += [
        ("old-pending", "pending", "confirmed", 400),
        ("old-open", "success", "enqueued", 400),
        ("young", "success", "confirmed", 30),
    ]
    for event_id, outcome, status, days in claims:
        await new_event(pool, settings, account, event_id, "1", EventType.DEPOSIT)
        await owner_pool.execute(
            "UPDATE payment_events SET status = $2 WHERE event_id = $1", event_id, status
        )
        await owner_pool.execute(
            "INSERT INTO processed_events (idempotency_key, event_id, outcome, created_at)"
            " VALUES ($1, $2, $3, now() - make_interval(days => $4))",
            posting_key(event_id),
            event_id,
            outcome,
            days,
        )
    small = settings.model_copy(
        update={"processed_events_cleanup_batch": 2, "processed_events_cleanup_pause_s": 0.01}
    )
    run = await run_job(JobContext(pool, small, RecordingSink()), "cleanup_processed_events")
    assert run is not None
    assert (run.result.outcome, run.result.summary) == (Outcome.OK, "deleted=5 batches=3")
    left = {r[0] for r in await owner_pool.fetch("SELECT event_id FROM processed_events")}
    assert left == {"old-pending", "old-open", "young"}
    # Bounded per run: one batch of one claim at most.
    await owner_pool.execute(
        "UPDATE payment_events SET status = 'confirmed' WHERE event_id = 'old-open'"
    )
    await owner_pool.execute(
        "UPDATE processed_events SET created_at = now() - interval '100 days'"
        " WHERE event_id = 'young'"
    )
    one = small.model_copy(
        update={"processed_events_cleanup_batch": 1, "processed_events_cleanup_max_batches": 1}
    )
    run = await run_job(JobContext(pool, one, RecordingSink()), "cleanup_processed_events")
    assert run is not None and run.result.summary == "deleted=1 batches=1"
    assert await owner_pool.fetchval("SELECT count(*) FROM processed_events") == 2


async def test_attempt_log_retention_runs_in_batches_and_keeps_recent_attempts(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    async with pool.acquire() as conn:
        merchant, _api_key, _secret = await create_merchant(conn, "attempts", admin=False)
    payment = await owner_pool.fetchval(
        "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, status,"
        " processed_at, webhook_url) VALUES ($1, 1.00, 'USD', 'k-attempts', 'succeeded',"
        " now(), 'https://hooks.example.com/x') RETURNING id",
        merchant,
    )
    # Five attempts 31..35 days old, two within the retention (1 hour, 29 days).
    await owner_pool.executemany(
        "INSERT INTO webhook_attempt_log (payment_id, attempt, http_status, attempted_at)"
        " VALUES ($1, $2, 503, now() - make_interval(days => $3))",
        [(payment, n, days) for n, days in enumerate((35, 34, 33, 32, 31), start=1)],
    )
    await owner_pool.executemany(
        "INSERT INTO webhook_attempt_log (payment_id, attempt, http_status, attempted_at)"
        " VALUES ($1, $2, 200, now() - make_interval(hours => $3))",
        [(payment, 6, 29 * 24), (payment, 7, 1)],
    )
    small = settings.model_copy(update={"webhook_attempt_log_cleanup_batch": 2})
    run = await run_job(JobContext(pool, small, RecordingSink()), "cleanup_webhook_attempt_log")
    assert run is not None
    assert (run.result.outcome, run.result.summary) == (Outcome.OK, "deleted=5 batches=3")
    left = [r[0] for r in await owner_pool.fetch("SELECT attempt FROM webhook_attempt_log")]
    assert sorted(left) == [6, 7]
    # Bounded per run: one batch of one row at most; a tiny retention is clamped to 1 day.
    await owner_pool.execute(
        "UPDATE webhook_attempt_log SET attempted_at = now() - interval '3 days' WHERE attempt = 6"
    )
    await owner_pool.executemany(
        "INSERT INTO webhook_attempt_log (payment_id, attempt, http_status, attempted_at)"
        " VALUES ($1, $2, 503, now() - interval '2 days')",
        [(payment, 8), (payment, 9)],
    )
    one = small.model_copy(
        update={
            "webhook_attempt_log_retention_days": 1,
            "webhook_attempt_log_cleanup_batch": 1,
            "webhook_attempt_log_cleanup_max_batches": 1,
        }
    )
    run = await run_job(JobContext(pool, one, RecordingSink()), "cleanup_webhook_attempt_log")
    assert run is not None and run.result.summary == "deleted=1 batches=1"
    left = [r[0] for r in await owner_pool.fetch("SELECT attempt FROM webhook_attempt_log")]
    assert sorted(left) == [7, 8, 9]  # oldest first: attempt 6 (3 days) went
    # Disabled (0): the job skips and deletes nothing.
    off = one.model_copy(update={"webhook_attempt_log_retention_days": 0})
    run = await run_job(JobContext(pool, off, RecordingSink()), "cleanup_webhook_attempt_log")
    assert run is not None and run.result.outcome == Outcome.SKIPPED
    assert await owner_pool.fetchval("SELECT count(*) FROM webhook_attempt_log") == 3


async def test_the_pipeline_jobs_report_their_findings_as_alerts(
    ctx: JobContext, pool: asyncpg.Pool, owner_pool: asyncpg.Pool, sink: RecordingSink
) -> None:
    account = await new_account(pool, ctx.settings)
    await new_event(pool, ctx.settings, account, "ev-long-waiting", "1", EventType.DEPOSIT)
    await owner_pool.execute(
        "UPDATE payment_events SET status = 'enqueued', retry_count = $1,"
        " updated_at = now() - interval '1 day'",
        ctx.settings.max_event_retries,
    )
    await owner_pool.execute(
        "INSERT INTO outbox (topic, payload, created_at, published_at) VALUES"
        " ('t', '{}', now() - interval '3 days', now() - interval '2 days')"
    )
    run = await run_job(ctx, "recover_stale_events")
    assert run is not None
    assert (run.result.outcome, run.result.summary) == (Outcome.ALERT, "recovered=1 waiting=1")
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM outbox WHERE published_at IS NULL AND topic = 'ledger.event'"
        )
        == 1
    )
    stale = ctx.settings.model_copy(update={"outbox_stale_alert_s": 0.001})
    run = await run_job(JobContext(pool, stale, sink), "alert_stale_outbox")
    assert run is not None and run.result == JobResult(Outcome.ALERT, "stale=1")
    assert sink.keys() == ["events.waiting", "outbox.stale"]
    run = await run_job(ctx, "cleanup_outbox")
    assert run is not None and run.result == JobResult(Outcome.OK, "deleted=1")
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 1  # the unpublished row stays
