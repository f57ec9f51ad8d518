"""No queue fills up that nothing consumes, and `payflow status` names one that does.

Insufficient-funds and payout notifications have no consumer in payflow (merchants hear
through webhooks). Published to queues nothing reads, they grew without bound (about
three messages per payout) until a broker alarm would block every publisher.
"""

from __future__ import annotations

import uuid

import aio_pika
import asyncpg

from payflow.broker.topology import (
    TOPIC_LEDGER_EVENT,
    TOPIC_PAYOUT_NOTIFICATION,
    Names,
    declare_topology,
)
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.records import EventType
from payflow.ops.status import collect_status
from payflow.outbox.writer import enqueue
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.support import consumers, rabbitmqctl, wait_until

PAYMENTS = 6
REFUSED_WITHDRAWALS = 4
PAYOUT_NOTES = 9  # about three per payout: held, sent, confirmed


def _queues(vhost: str) -> dict[str, tuple[int, int]]:
    """{queue: (messages, consumers)} of every queue of `vhost` (rabbitmqctl)."""
    out = rabbitmqctl("list_queues", "-p", vhost, "--no-table-headers", "name,messages,consumers")
    rows = (line.split("\t") for line in out.splitlines() if line.strip())
    return {name: (int(messages), int(consumers)) for name, messages, consumers in rows}


async def _notifications(pool: asyncpg.Pool, settings: Settings) -> None:
    """Refused withdrawals (the ledger worker writes an insufficient-funds notification
    for each) and payout state changes as the payout engine records them."""
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USD")  # no funds: every debit refused
        for index in range(REFUSED_WITHDRAWALS):
            event_id = f"wd-{index}"
            await record_event(
                conn,
                event_id=event_id,
                account_id=account.id,
                amount="5.00",
                event_type=EventType.WITHDRAWAL,
                scale=2,
            )
            await enqueue(conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id})
        for index in range(PAYOUT_NOTES):
            status = ("held", "sent", "confirmed")[index % 3]
            await enqueue(
                conn,
                TOPIC_PAYOUT_NOTIFICATION,
                {"version": 1, "type": f"payout.{status}", "payout_id": str(index // 3)},
            )


async def test_nothing_waits_in_a_queue_without_a_consumer(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    vhost: str,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    running = await start_roles()
    for index in range(PAYMENTS):
        await submitter.submit_payment(merchant[0], "2.50", "USD", f"k-{index}", sink.url)
    await _notifications(pool, pipe_settings)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = $1 FROM payment_events WHERE status = 'failed'",
            REFUSED_WITHDRAWALS,
        ),
        what="the withdrawals refused",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = $1 FROM payments WHERE webhook_delivered_at IS NOT NULL",
            PAYMENTS,
        ),
        what="every payment delivered",
    )
    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL"),
        what="the outbox drained",
    )
    queues = _queues(vhost)
    # Consumers by a passive declare, as `payflow status` reads them.
    attached = {q: await consumers(pipe_settings, q) for q in queues}
    await running.stop()
    notes = await pool.fetchval(
        "SELECT count(*) FROM outbox WHERE topic LIKE 'notification.%' AND published_at IS NOT NULL"
    )
    assert notes == REFUSED_WITHDRAWALS + PAYOUT_NOTES  # settled, kept as the record
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0
    names = Names(pipe_settings.broker_prefix)
    assert names.queue("notifications") not in queues
    assert names.queue("payout_notifications") not in queues
    work = {names.queue(short) for short in ("payments", "ledger", "webhooks")}
    # While the worker ran, every work queue had its consumer, and nothing waited in any
    # queue without one (parking queues are empty: nothing was dead-lettered).
    assert all(attached[q] >= 1 for q in work), attached
    holding = {q: messages for q, (messages, _) in queues.items() if messages and not attached[q]}
    assert holding == {}, queues


async def test_status_names_a_queue_that_holds_messages_and_has_no_consumer(
    pool: asyncpg.Pool, pipe_settings: Settings, vhost: str
) -> None:
    names = Names(pipe_settings.broker_prefix)
    leftover = names.queue("payout_notifications")
    connection = await aio_pika.connect(pipe_settings.rabbitmq_url)
    try:
        channel = await connection.channel()
        await declare_topology(channel, pipe_settings)
        status = await collect_status(pool, pipe_settings)
        assert not [p for p in status.problems if "consumer" in p or "queue" in p], status
        # A feed queue an earlier version declared, still filled by nothing but holding
        # messages; and a work queue whose workers are all gone.
        await channel.declare_queue(leftover, durable=True)
        for index in range(3):
            await channel.default_exchange.publish(
                aio_pika.Message(body=str(index).encode()), routing_key=leftover
            )
        await channel.default_exchange.publish(
            aio_pika.Message(body=b"{}"), routing_key=names.queue("ledger")
        )
        status = await collect_status(pool, pipe_settings)
    finally:
        await connection.close()
    problems = [p for p in status.problems if "consumer" in p]
    assert problems == [
        f"queue without consumer: {names.queue('ledger')} (1 messages waiting)",
        f"queue without consumer: {leftover} (3 messages waiting)",
    ], status.problems
    assert not status.ok
