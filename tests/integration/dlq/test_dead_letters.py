"""Dead-lettering from the workers: exhausted payments, unknown events, garbage bodies."""

from __future__ import annotations

import uuid

import aio_pika
import asyncpg

from payflow.config import Settings
from payflow.errors import RetryableError
from payflow.outbox.writer import enqueue
from payflow.payments.gateway import ChargeRequest, ChargeResult
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import queue_depth, wait_until


class DownGateway:
    """A gateway that is always unreachable (charge and status alike)."""

    def __init__(self) -> None:
        self.charges = 0
        self.status_calls = 0

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        self.charges += 1
        raise RetryableError("gateway unreachable")

    async def status(self, payment_id: uuid.UUID) -> ChargeResult | None:
        self.status_calls += 1
        raise RetryableError("gateway unreachable")


async def test_payment_whose_gateway_stays_down_is_dead_lettered_pending_for_review(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    """The charge was sent once and its outcome never learnt: the payment must not be
    failed (the customer may have been charged). It stays pending, its attempt waits for
    review, the DLQ row is recorded, and every redelivery asked instead of charging."""
    gateway = DownGateway()
    running = await start_roles(gateway=gateway)
    payment_id = await submitter.submit_payment(merchant[0], "8.00", "USD", "k-down", sink.url)
    dead = await wait_until(
        lambda: pool.fetchrow(
            "SELECT * FROM dead_letter_queue WHERE source = 'payment' AND subject_id = $1",
            str(payment_id),
        ),
        what="payment dead letter",
    )
    await running.stop()
    assert gateway.charges == 1
    assert gateway.status_calls == 4  # 3 redeliveries + on_dead's one question
    assert dead["attempt"] == 4
    payment = await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id)
    assert payment["status"] == "pending"
    assert payment["processed_at"] is None
    attempts = await pool.fetch(
        "SELECT attempt, state FROM charge_attempts WHERE payment_id = $1 ORDER BY attempt",
        payment_id,
    )
    assert [tuple(a) for a in attempts] == [
        (1, "superseded"),
        (2, "superseded"),
        (3, "superseded"),
        (4, "needs_review"),
    ]
    assert sink.received == []
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 0
    assert await queue_depth(pipe_settings, "payflow.payments.dlq") == 1


async def test_unknown_event_is_dead_lettered_at_once(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await enqueue(conn, "ledger.event", {"version": 1, "event_id": "no-such-event"})
    running = await start_roles()
    row = await wait_until(
        lambda: pool.fetchrow("SELECT * FROM dead_letter_queue WHERE subject_id = 'no-such-event'"),
        what="dead letter",
    )
    await running.stop()
    assert (row["source"], row["attempt"]) == ("payment_event", 1)
    assert "NotFound" in row["error"]


async def test_undecodable_message_is_parked_not_lost(pipe_settings: Settings, start_roles) -> None:
    running = await start_roles(("worker",))
    connection = await aio_pika.connect(pipe_settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        exchange = await channel.get_exchange("payflow")
        await exchange.publish(aio_pika.Message(b"not json"), routing_key="ledger.event")
    finally:
        await connection.close()

    async def parked() -> bool:
        return await queue_depth(pipe_settings, "payflow.ledger.dlq") == 1

    await wait_until(parked, what="garbage parked in the DLQ queue")
    await running.stop()
