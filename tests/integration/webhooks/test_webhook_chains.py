"""One live retry chain per webhook job (payflow.webhooks.chains), on real PostgreSQL and
RabbitMQ: duplicates of a job (sweeps, re-published messages, a crashed sender's
redelivery) are dropped while its owner lives, a dead webhook has one dead letter, and a
sender killed mid-POST is re-delivered by the sweep after its lease expires."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from pathlib import Path

import asyncpg

from payflow.broker.topology import TOPIC_WEBHOOK_DELIVER
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.metrics import REGISTRY
from payflow.outbox.writer import enqueue
from payflow.webhooks.chains import (
    IN_FLIGHT,
    OTHER_CHAIN,
    STALE_COPY,
    dead_letter_webhook,
    duplicate_reason,
)
from payflow.webhooks.sweeps import sweep_undelivered_webhooks
from payflow_lab.bench.sink import WebhookSink
from tests.integration.support import wait_until
from tests.processes import spawn_role

LONG_AGO = "now() - interval '1 day'"


def _duplicates_dropped() -> float:
    sample = REGISTRY.get_sample_value("payflow_webhook_attempts_total", {"result": "duplicate"})
    return sample or 0.0


async def _publish_duplicates(
    pool: asyncpg.Pool, settings: Settings, payment_id: uuid.UUID
) -> None:
    """Two more `webhook.deliver` jobs for the payment, through the outbox and the relay."""
    async with pool.acquire() as conn, transaction(conn, settings):
        for _ in range(2):
            await enqueue(
                conn, TOPIC_WEBHOOK_DELIVER, {"version": 1, "payment_id": str(payment_id)}
            )


async def _final_payment_with_job(
    owner_pool: asyncpg.Pool,
    pool: asyncpg.Pool,
    settings: Settings,
    merchant_id: uuid.UUID,
    url: str,
    key: str,
) -> uuid.UUID:
    """A succeeded payment and its `webhook.deliver` job in the outbox, as
    `finalize_payment` leaves them (no gateway involved)."""
    payment_id: uuid.UUID = await owner_pool.fetchval(
        "INSERT INTO payments (merchant_id, amount, currency, idempotency_key, status,"
        " processed_at, webhook_url) VALUES ($1, 6.00, 'USD', $3, 'succeeded', now(), $2)"
        " RETURNING id",
        merchant_id,
        url,
        key,
    )
    async with pool.acquire() as conn, transaction(conn, settings):
        await enqueue(conn, TOPIC_WEBHOOK_DELIVER, {"version": 1, "payment_id": str(payment_id)})
    return payment_id


async def _webhook_row(pool: asyncpg.Pool, payment_id: uuid.UUID) -> asyncpg.Record:
    row = await pool.fetchrow(
        "SELECT webhook_attempts, webhook_delivered_at, webhook_dead_at, webhook_lease_token"
        " FROM payments WHERE id = $1",
        payment_id,
    )
    assert row is not None
    return row


def test_duplicate_reason_lets_one_chain_drive_a_job() -> None:
    """The rules, on `lock_payment_for_webhook`-shaped rows."""

    def job(lease: bool, owner: str | None, attempt: int | None, overdue: float | None):  # type: ignore[no-untyped-def]
        return {
            "lease_live": lease,
            "webhook_chain_message": owner,
            "webhook_chain_attempt": attempt,
            "overdue_s": overdue,
        }

    assert duplicate_reason(job(False, None, None, None), "m1", 1, 15) is None  # first
    assert duplicate_reason(job(True, "m1", 2, -1), "m1", 2, 15) == IN_FLIGHT
    assert duplicate_reason(job(False, "m1", 2, -0.5), "m1", 2, 15) is None  # its retry
    assert duplicate_reason(job(False, "m1", 2, -0.5), "m1", 3, 15) is None  # later attempt
    assert duplicate_reason(job(False, "m1", 2, -0.5), "m1", 1, 15) == STALE_COPY
    assert duplicate_reason(job(False, "m1", 2, 3.0), "m2", 1, 15) == OTHER_CHAIN
    assert duplicate_reason(job(False, "m1", 2, 16.0), "m2", 1, 15) is None  # owner died


async def test_always_500_ends_with_one_dead_letter_despite_sweeps_and_duplicates(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    """The old sweep re-announced by the payment's age, so a job still on its tiers got a
    second chain and a second dead letter; now the sweep waits for an overdue chain and
    duplicates are dropped: one chain, 1 + len(tiers) POSTs, one DLQ row."""
    settings = pipe_settings.model_copy(
        update={"retry_tiers_ms": (300, 300, 300), "webhook_sweep_after_s": 3.0}
    )
    sink.status_for = lambda _r: 500
    await start_roles(settings=settings, worker_queues=("webhooks",))
    payment_id = await _final_payment_with_job(
        owner_pool, pool, settings, merchant[0], sink.url, "k-500"
    )
    await wait_until(
        lambda: pool.fetchval("SELECT webhook_attempts >= 1 FROM payments"), what="first POST"
    )
    # Old enough for the payment-age sweep to fire; the chain is on its tiers.
    await owner_pool.execute(f"UPDATE payments SET processed_at = {LONG_AGO}")
    await _publish_duplicates(pool, settings, payment_id)
    announced = 0
    for _ in range(20):
        announced += (await sweep_undelivered_webhooks(pool, settings, database=settings)).announced
        await asyncio.sleep(0.05)
    await _publish_duplicates(pool, settings, payment_id)
    await wait_until(
        lambda: pool.fetchval("SELECT webhook_dead_at IS NOT NULL FROM payments"),
        what="webhook dead-lettered",
    )
    await _publish_duplicates(pool, settings, payment_id)  # after its death: dropped too
    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL"),
        what="duplicates published",
    )
    await asyncio.sleep(1.0)  # let every duplicate reach the worker
    announced += (await sweep_undelivered_webhooks(pool, settings, database=settings)).announced
    rows = await pool.fetch(
        "SELECT subject_id, attempt FROM dead_letter_queue WHERE source = 'webhook'"
    )
    assert [(r["subject_id"], r["attempt"]) for r in rows] == [(str(payment_id), 4)]
    assert announced == 0
    row = await _webhook_row(pool, payment_id)
    assert row["webhook_delivered_at"] is None and row["webhook_dead_at"] is not None
    assert row["webhook_attempts"] == 1 + len(settings.retry_tiers_ms) == len(sink.received)
    # Dead-lettering it again, even as its owner's last message, writes nothing.
    owner = await pool.fetchrow(
        "SELECT webhook_chain_message, webhook_chain_attempt FROM payments WHERE id = $1",
        payment_id,
    )
    async with pool.acquire() as conn, transaction(conn, settings):
        again = await dead_letter_webhook(
            conn,
            {"version": 1, "payment_id": str(payment_id)},
            "WebhookHTTPStatus: 500",
            owner["webhook_chain_attempt"],
            message_id=owner["webhook_chain_message"],
        )
    assert again is None
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 1


async def test_duplicate_during_a_slow_send_is_dropped_and_delivered_once(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    """Tiers (240 ms in all) far shorter than the lease: a duplicate that arrives while
    the slow receiver holds the POST is dropped, never run through the tiers to a dead
    letter; the webhook is delivered once."""
    settings = pipe_settings.model_copy(update={"webhook_timeout_s": 5.0, "webhook_lease_s": 6.0})
    sink.delay_s = 3.0
    dropped_before = _duplicates_dropped()
    await start_roles(settings=settings, worker_queues=("webhooks",))
    payment_id = await _final_payment_with_job(
        owner_pool, pool, settings, merchant[0], sink.url, "k-slow"
    )
    await wait_until(lambda: asyncio.sleep(0, sink.in_flight), what="the POST in flight")
    await _publish_duplicates(pool, settings, payment_id)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivered",
    )
    await wait_until(
        lambda: asyncio.sleep(0, _duplicates_dropped() - dropped_before >= 2),
        what="both duplicates dropped",
    )
    await asyncio.sleep(0.5)
    row = await _webhook_row(pool, payment_id)
    assert row["webhook_attempts"] == 1 and row["webhook_dead_at"] is None
    assert len(sink.received) == 1
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0


def _spawn_webhook_worker(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    return spawn_role(
        settings,
        log_path,
        "worker",
        "--queues",
        "webhooks",
        WEBHOOK_TIMEOUT_S="5",
        WEBHOOK_LEASE_S="6",
        LOG_LEVEL="DEBUG",
    )


async def test_sender_killed_mid_post_is_redelivered_by_the_sweep_after_its_lease(
    pool: asyncpg.Pool,
    owner_pool: asyncpg.Pool,
    pipe_settings: Settings,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
    tmp_path: Path,
) -> None:
    """SIGKILL while the receiver holds the POST: the lease is held, the attempt never
    recorded. The broker's redelivery is a duplicate of the in-flight job (dropped, not
    dead-lettered); once the lease ran out and the job is overdue, the sweep re-announces
    it and it is delivered, under the same webhook-id."""
    settings = pipe_settings.model_copy(update={"webhook_sweep_after_s": 0.5})
    payment_id = await _final_payment_with_job(
        owner_pool, pool, settings, merchant[0], sink.url, "k-killed"
    )
    await start_roles(("relay",), settings=settings)
    sink.delay_s = 4.0
    log_path = tmp_path / "worker.log"
    proc = _spawn_webhook_worker(settings, log_path)
    try:
        await wait_until(lambda: asyncio.sleep(0, sink.in_flight), what="the POST in flight")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    sink.delay_s = 0.0
    dropped_before = _duplicates_dropped()
    await start_roles(("worker",), settings=settings, worker_queues=("webhooks",))
    await wait_until(
        lambda: asyncio.sleep(0, _duplicates_dropped() > dropped_before),
        what="the redelivery dropped as a duplicate of the in-flight job",
    )
    row = await _webhook_row(pool, payment_id)
    assert row["webhook_lease_token"] is not None  # the dead send's, never recorded
    assert (row["webhook_attempts"], row["webhook_delivered_at"], row["webhook_dead_at"]) == (
        0,
        None,
        None,
    )

    async def swept() -> int:
        return (await sweep_undelivered_webhooks(pool, settings, database=settings)).announced

    await wait_until(swept, limit_s=20, what="the sweep after the lease expired")
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivered after the sweep",
    )
    await sink.wait_for(2)  # the killed POST is answered into a closed socket
    row = await _webhook_row(pool, payment_id)
    assert (row["webhook_attempts"], row["webhook_dead_at"]) == (1, None)
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0
    ids = {r.headers["webhook-id"] for r in sink.received}
    assert ids == {f"msg_{payment_id.hex}"}
