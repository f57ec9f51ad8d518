"""Webhook delivery: retry tiers, the DLQ, classification and the send-time SSRF guard."""

from __future__ import annotations

import uuid

import asyncpg

from payflow.config import Settings
from payflow_lab.bench.sink import Received, WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import queue_depth, wait_until


async def test_sink_answering_500_gives_four_attempts_then_dlq(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    sink.status_for = lambda _r: 500
    running = await start_roles()
    payment_id = await submitter.submit_payment(merchant[0], "5.00", "USD", "k-500", sink.url)
    dlq = await wait_until(
        lambda: pool.fetchrow(
            "SELECT * FROM dead_letter_queue WHERE source = 'webhook' AND subject_id = $1",
            str(payment_id),
        ),
        what="webhook dead letter",
    )
    await running.stop()
    payment = await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id)
    assert payment["status"] == "succeeded"
    assert payment["webhook_attempts"] == 4
    assert payment["webhook_delivered_at"] is None
    assert len(sink.received) == 4
    assert len({r.headers["webhook-id"] for r in sink.received}) == 1
    assert dlq["attempt"] == 4
    assert "500" in dlq["error"]
    assert await queue_depth(pipe_settings, "payflow.webhooks.dlq") == 1
    # The credit is independent of the webhook: it landed once.
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1


async def test_429_then_200_is_retried_and_delivered_once(
    pool: asyncpg.Pool,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    answers = iter([429, 503, 200])
    sink.status_for = lambda _r: next(answers, 200)
    running = await start_roles()
    payment_id = await submitter.submit_payment(merchant[0], "1", "EUR", "k-429", sink.url)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivery after retries",
    )
    await running.stop()
    assert (
        await pool.fetchval("SELECT webhook_attempts FROM payments WHERE id = $1", payment_id) == 3
    )
    assert len(sink.received) == 3
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_client_error_is_not_retried(
    pool: asyncpg.Pool,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    def gone(_r: Received) -> int:
        return 410

    sink.status_for = gone
    running = await start_roles()
    payment_id = await submitter.submit_payment(merchant[0], "1", "EUR", "k-410", sink.url)
    row = await wait_until(
        lambda: pool.fetchrow(
            "SELECT attempt, error FROM dead_letter_queue WHERE subject_id = $1", str(payment_id)
        ),
        what="dead letter for 410",
    )
    await running.stop()
    assert row["attempt"] == 1
    assert "DeliveryRefused" in row["error"]
    assert len(sink.received) == 1


async def test_ssrf_guard_refuses_private_target_at_send_time(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    start_roles,
) -> None:
    strict = pipe_settings.model_copy(update={"webhook_allow_hosts": ()})
    running = await start_roles(settings=strict)
    payment_id = await submitter.submit_payment(
        merchant[0], "1", "EUR", "k-ssrf", "http://169.254.169.254/latest/meta-data"
    )
    row = await wait_until(
        lambda: pool.fetchrow(
            "SELECT attempt, error FROM dead_letter_queue WHERE subject_id = $1", str(payment_id)
        ),
        what="dead letter for a private target",
    )
    await running.stop()
    assert "not a public" in row["error"]
    assert (
        await pool.fetchval("SELECT webhook_attempts FROM payments WHERE id = $1", payment_id) == 0
    )
