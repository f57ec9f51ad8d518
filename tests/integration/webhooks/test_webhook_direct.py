"""The finalizing worker's own first webhook send (`payflow.webhooks.direct`), on the real
database, Redis (the gateway emulator) and a real HTTP receiver: the finalize takes the
webhook's lease and holds its job back; the worker POSTs and settles the job; whatever
goes wrong, the held job brings the webhook to a chain of the webhooks queue."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from payflow.config import Settings
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.payments.processor import PaymentProcessor
from payflow.roles import default_gateway
from payflow.webhooks.direct import DirectSends
from payflow.webhooks.sender import WebhookSender, build_http_client, webhook_id
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.outbox.test_outbox_wake import finalized
from tests.integration.payments.charges.workers import payment_created
from tests.integration.payments.test_held_credit import _merchant_with_account
from tests.integration.support import wait_until
from tests.integration.webhooks.test_webhook_leases import _envelope

BOUNDS = StatementBounds(lock_timeout_ms=2000, statement_timeout_ms=5000)
SQL = load_queries("payflow.webhooks")


class Worker:
    """A payment worker with direct sends, and the webhooks queue's sender beside it."""

    def __init__(self, pool: asyncpg.Pool, settings: Settings, redis: Redis) -> None:
        self.client = build_http_client(settings)
        self.sender = WebhookSender(
            pool, settings, self.client, database=settings, pipeline=settings, broker=settings
        )
        self.direct = DirectSends(pool, settings, self.sender, database=settings)
        self.processor = PaymentProcessor(
            pool,
            settings,
            default_gateway(settings, redis, redis_settings=settings),
            direct=self.direct,
            database=settings,
        )


@pytest.fixture
async def worker(pool: asyncpg.Pool, pipe_settings: Settings) -> AsyncIterator[Worker]:
    # The charge is made in this process and must finish: the pipeline's 0.1 s charge
    # lease (made for takeovers) is shorter than a loaded machine's gateway call.
    settings = pipe_settings.model_copy(update={"charge_lease_s": 30.0})
    redis = Redis.from_url(settings.redis_url)
    made = Worker(pool, settings, redis)
    try:
        yield made
    finally:
        await made.direct.wait(5.0)
        await made.client.aclose()
        await redis.aclose()


async def _pending(pool: asyncpg.Pool, settings: Settings, url: str) -> uuid.UUID:
    merchant, _ = await _merchant_with_account(pool)
    return await DirectSubmitter(pool, settings).submit_payment(
        merchant, "7.50", "USD", uuid.uuid4().hex, url
    )


async def _job(pool: asyncpg.Pool, payment_id: uuid.UUID) -> asyncpg.Record | None:
    """The payment's webhook.deliver outbox row: (id, published, held past its lease)."""
    return await pool.fetchrow(
        "SELECT o.id, o.published_at IS NOT NULL AS published, o.next_attempt_at,"
        " o.next_attempt_at > now() AS held FROM outbox o"
        " WHERE o.topic = 'webhook.deliver' AND o.payload->>'payment_id' = $1",
        str(payment_id),
    )


async def _webhook(pool: asyncpg.Pool, payment_id: uuid.UUID) -> asyncpg.Record:
    row: asyncpg.Record = await pool.fetchrow(
        "SELECT webhook_attempts, webhook_delivered_at, webhook_lease_token,"
        " webhook_lease_until, webhook_chain_message, webhook_dead_at,"
        " (SELECT array_agg(http_status ORDER BY attempt) FROM webhook_attempt_log l"
        "   WHERE l.payment_id = p.id) AS answers"
        " FROM payments p WHERE id = $1",
        payment_id,
    )
    return row


async def test_the_finalizing_worker_delivers_its_own_webhook_and_settles_its_job(
    pool: asyncpg.Pool, pipe_settings: Settings, sink: WebhookSink, worker: Worker
) -> None:
    payment_id = await _pending(pool, pipe_settings, sink.url)
    await worker.processor.handle(payment_created(payment_id))
    await worker.direct.wait(5.0)
    [request] = sink.received
    assert request.headers["webhook-id"] == webhook_id(payment_id)
    assert json.loads(request.body) == {
        "payment_id": str(payment_id),
        "status": "succeeded",
        "amount": "7.50",
        "currency": "USD",
    }
    row = await _webhook(pool, payment_id)
    assert row["webhook_attempts"] == 1 and row["webhook_delivered_at"] is not None
    assert (row["webhook_lease_token"], row["webhook_lease_until"]) == (None, None)
    assert row["answers"] == [200]
    assert await _job(pool, payment_id) is None  # deleted in the record's commit
    # A copy of the job arriving now (a replay, say) finds it delivered: no second POST.
    await worker.sender.handle(_envelope(payment_id))
    assert len(sink.received) == 1


async def test_a_failed_direct_send_leaves_the_job_to_a_chain_after_the_first_tier(
    pool: asyncpg.Pool, pipe_settings: Settings, worker: Worker
) -> None:
    answers = iter([500, 200])
    sink = WebhookSink(status_for=lambda _request: next(answers))
    await sink.start()
    try:
        payment_id = await _pending(pool, pipe_settings, sink.url)
        await worker.processor.handle(payment_created(payment_id))
        await worker.direct.wait(5.0)
        row = await _webhook(pool, payment_id)
        assert (row["webhook_attempts"], row["webhook_delivered_at"]) == (1, None)
        assert row["webhook_lease_token"] is None and row["answers"] == [500]
        job = await _job(pool, payment_id)
        assert job is not None and not job["published"]  # the relay publishes it when due
        first_tier_s = pipe_settings.retry_tiers_ms[0] / 1000
        due_in = await pool.fetchval(
            "SELECT extract(epoch FROM $1 - clock_timestamp())::float8", job["next_attempt_at"]
        )
        assert due_in <= first_tier_s
        # The relay's message reaches a chain, which owns the job from now on.
        await worker.sender.handle(_envelope(payment_id))
    finally:
        await sink.stop()
    row = await _webhook(pool, payment_id)
    assert row["webhook_attempts"] == 2 and row["webhook_delivered_at"] is not None
    assert row["answers"] == [500, 200]
    assert row["webhook_chain_message"] == f"m-{payment_id}"
    assert len(sink.received) == 2


async def test_a_worker_that_dies_after_finalizing_leaves_a_held_job_and_a_live_lease(
    pool: asyncpg.Pool, pipe_settings: Settings, sink: WebhookSink, worker: Worker
) -> None:
    payment_id = await _pending(pool, pipe_settings, sink.url)
    done = await finalized(pool, payment_id, lease=("dead-worker", 1.0))
    # ... and the worker dies here, before its POST.
    assert done.held_webhook is not None
    job = await _job(pool, payment_id)
    assert job is not None and job["id"] == done.held_webhook and job["held"]
    row = await _webhook(pool, payment_id)
    assert row["webhook_lease_token"] == "dead-worker"
    assert job["next_attempt_at"] == row["webhook_lease_until"]  # held exactly as long
    # A copy arriving while the lease is live is a duplicate: no POST, the job stays.
    await worker.sender.handle(_envelope(payment_id))
    assert sink.received == []
    assert (await _job(pool, payment_id))["held"]

    async def lease_over() -> bool:
        job = await _job(pool, payment_id)
        return job is not None and not job["held"]

    await wait_until(lease_over, limit_s=10, what="the held job to come due")
    await worker.sender.handle(_envelope(payment_id))  # the relay's message
    row = await _webhook(pool, payment_id)
    assert row["webhook_attempts"] == 1 and row["webhook_delivered_at"] is not None
    assert len(sink.received) == 1


async def test_with_every_send_slot_busy_the_job_goes_through_the_queue_at_once(
    pool: asyncpg.Pool, pipe_settings: Settings, sink: WebhookSink
) -> None:
    settings = pipe_settings.model_copy(update={"webhook_max_in_flight": 1})
    redis = Redis.from_url(settings.redis_url)
    busy = Worker(pool, settings, redis)
    try:
        payment_id = await _pending(pool, settings, sink.url)
        async with busy.sender.sending:  # a chain's send holds the only slot
            await busy.processor.handle(payment_created(payment_id))
        await busy.direct.wait(5.0)
    finally:
        await busy.client.aclose()
        await redis.aclose()
    assert sink.received == []
    job = await _job(pool, payment_id)
    assert job is not None and not job["held"] and not job["published"]
    assert (await _webhook(pool, payment_id))["webhook_lease_token"] is None


async def test_a_refused_url_is_handed_back_to_a_chain_unsent(
    pool: asyncpg.Pool, pipe_settings: Settings, worker: Worker
) -> None:
    def refused() -> float:
        sample = REGISTRY.get_sample_value("payflow_webhook_attempts_total", {"result": "refused"})
        return sample or 0.0

    before = refused()
    payment_id = await _pending(pool, pipe_settings, "http://10.1.2.3/hook")  # not allowed
    await worker.processor.handle(payment_created(payment_id))
    await worker.direct.wait(5.0)
    assert refused() == before  # counted once, by the chain that dead-letters it
    row = await _webhook(pool, payment_id)
    assert (row["webhook_attempts"], row["webhook_lease_token"]) == (0, None)
    job = await _job(pool, payment_id)
    assert job is not None and not job["held"] and not job["published"]
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


async def test_a_direct_send_cut_short_by_a_stop_counts_its_attempt(
    pool: asyncpg.Pool, pipe_settings: Settings, worker: Worker
) -> None:
    sink = WebhookSink(delay_s=1.5)  # below the POST's 2 s timeout: the stop ends it
    await sink.start()
    try:
        payment_id = await _pending(pool, pipe_settings, sink.url)
        await worker.processor.handle(payment_created(payment_id))
        await wait_until(lambda: asyncio.sleep(0, sink.in_flight), limit_s=10, what="the POST")
        await worker.direct.wait(0.01)  # the stop's grace ends while the merchant waits
    finally:
        await sink.stop()
    # The merchant may have the request: a failed attempt, never "nothing was sent".
    row = await _webhook(pool, payment_id)
    assert (row["webhook_attempts"], row["webhook_lease_token"]) == (1, None)
    assert row["answers"] == [None] and row["webhook_delivered_at"] is None
    error = await pool.fetchval(
        "SELECT error FROM webhook_attempt_log WHERE payment_id = $1", payment_id
    )
    assert error.startswith("WebhookSendCancelled")
    job = await _job(pool, payment_id)
    assert job is not None and not job["held"] and not job["published"]  # a chain's now


async def test_a_chains_send_cut_short_by_a_stop_counts_its_attempt_too(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings, worker: Worker
) -> None:
    sink = WebhookSink(delay_s=1.5)
    await sink.start()
    try:
        payment_id = await _pending(pool, pipe_settings, sink.url)
        await owner_pool.execute(
            "UPDATE payments SET status = 'succeeded', processed_at = now() WHERE id = $1",
            payment_id,
        )
        send = asyncio.create_task(worker.sender.handle(_envelope(payment_id)))
        await wait_until(lambda: asyncio.sleep(0, sink.in_flight), limit_s=10, what="the POST")
        send.cancel()
        with pytest.raises(asyncio.CancelledError):
            await send
    finally:
        await sink.stop()
    row = await _webhook(pool, payment_id)
    assert (row["webhook_attempts"], row["webhook_lease_token"]) == (1, None)
    assert row["answers"] == [None]


async def test_handing_back_never_waits_on_a_relay_holding_the_job(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings, sink: WebhookSink
) -> None:
    payment_id = await _pending(pool, pipe_settings, sink.url)
    done = await finalized(pool, payment_id, lease=("mine", 30.0))
    assert done.held_webhook is not None
    relay = await owner_pool.acquire()
    try:
        async with relay.transaction():  # a relay publishing the row holds it like this
            await relay.execute("SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE", done.held_webhook)
            async with pool.acquire() as conn:
                # Guarded: a wait on the row lock would run into this test's limit.
                await asyncio.wait_for(
                    conn.execute(
                        SQL["hand_back_direct_webhook"], payment_id, "mine", done.held_webhook, 200
                    ),
                    timeout=10,
                )
    finally:
        await owner_pool.release(relay)
    assert (await _webhook(pool, payment_id))["webhook_lease_token"] is None
