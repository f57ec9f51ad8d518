"""Dead-lettering from the workers: exhausted payments, unknown events, garbage bodies."""

from __future__ import annotations

import uuid

import aio_pika
import asyncpg
import orjson

from payflow.bench.sink import WebhookSink
from payflow.bench.submit import DirectSubmitter
from payflow.config import Settings
from payflow.errors import RetryableError
from payflow.outbox.writer import enqueue
from payflow.payments.gateway import ChargeRequest, ChargeResult
from tests.integration.pipeline.conftest import queue_depth, wait_until


class DownGateway:
    """A gateway that is always unreachable."""

    def __init__(self) -> None:
        self.calls = 0

    async def charge(self, request: ChargeRequest) -> ChargeResult:
        self.calls += 1
        raise RetryableError("gateway unreachable")


async def test_payment_whose_gateway_stays_down_fails_into_the_dlq_and_is_notified(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
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
    await sink.wait_for(1)
    await running.stop()
    assert gateway.calls == 4
    assert dead["attempt"] == 4
    payment = await pool.fetchrow("SELECT * FROM payments WHERE id = $1", payment_id)
    assert payment["status"] == "failed"
    assert payment["processed_at"] is not None
    assert orjson.loads(sink.received[0].body)["status"] == "failed"
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
