"""At-least-once delivery with exactly-once effects: duplicates, two relays, a relay
that dies between publish and mark, and one notification per refused withdrawal."""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from typing import Any

import aio_pika
import asyncpg
import pytest

from payflow.broker.connection import confirm_channel, connect
from payflow.broker.topology import declare_topology
from payflow.config import Settings
from payflow.db.tx import transaction
from payflow.ledger.accounts import create_account, record_event
from payflow.ledger.announce import ON_PUBLISHED
from payflow.ledger.recon import reconcile
from payflow.ledger.records import EventType
from payflow.outbox.relay import relay_once, run_relay
from payflow.outbox.writer import enqueue
from payflow_lab.bench.sink import WebhookSink
from payflow_lab.bench.submit import DirectSubmitter
from tests.integration.ledger.helpers import post_opening
from tests.integration.support import wait_until

N = 15


class TripleExchange:
    """Publishes every message three times: the broker delivers each one thrice."""

    def __init__(self, exchange: aio_pika.abc.AbstractExchange) -> None:
        self._exchange = exchange

    async def publish(self, message: aio_pika.Message, routing_key: str, **kwargs: Any) -> Any:
        for _ in range(3):
            await self._exchange.publish(message, routing_key=routing_key, **kwargs)


async def _load(
    pool: asyncpg.Pool,
    settings: Settings,
    submitter: DirectSubmitter,
    merchant: uuid.UUID,
    url: str,
) -> uuid.UUID:
    async with pool.acquire() as conn, transaction(conn, settings):
        account = await create_account(conn, "USD", Decimal(0))
    for i in range(N):
        await submitter.submit_payment(merchant, "2.00", "USD", f"k-{i}", url)
        await submitter.submit_deposit(f"dep-{i}", account.id, "3.00")
    return account.id


async def _assert_exactly_once(
    pool: asyncpg.Pool,
    settings: Settings,
    merchant: uuid.UUID,
    account: uuid.UUID,
    sink: WebhookSink,
) -> None:
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = $1 FROM payments WHERE webhook_delivered_at IS NOT NULL", N
        ),
        what="every webhook delivered",
    )
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = 0 FROM payment_events WHERE status <> 'confirmed'"
        ),
        what="every event confirmed",
    )
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 2 * N
    merchant_balance = await pool.fetchval(
        "SELECT balance FROM accounts WHERE merchant_id = $1", merchant
    )
    assert merchant_balance == Decimal("2.00") * N
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account) == (
        Decimal("3.00") * N
    )
    ids = [r.headers["webhook-id"] for r in sink.received]
    assert len(set(ids)) == N  # one logical webhook per payment
    assert len(ids) == N  # and duplicates of a job never POST again once delivered
    assert await pool.fetchval("SELECT max(webhook_attempts) FROM payments") == 1
    assert (await reconcile(pool, settings, full=True)).clean


async def test_every_message_delivered_three_times_has_one_effect(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    account = await _load(pool, pipe_settings, submitter, merchant[0], sink.url)
    running = await start_roles(("worker",))
    connection = await connect(pipe_settings, name="triple-relay")
    stop = asyncio.Event()
    try:
        channel = await confirm_channel(connection)
        names = await declare_topology(channel, pipe_settings)
        exchange = TripleExchange(await channel.get_exchange(names.exchange))
        relay = asyncio.create_task(
            run_relay(
                pool,
                pipe_settings,
                exchange,
                stop,
                database=pipe_settings,
                on_published=ON_PUBLISHED,
            )
        )  # type: ignore[arg-type]
        await _assert_exactly_once(pool, pipe_settings, merchant[0], account, sink)
    finally:
        stop.set()
        await relay
        await running.stop()
        await connection.close()


async def test_two_relays_at_once_lose_nothing_and_apply_nothing_twice(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    small_batches = pipe_settings.model_copy(update={"relay_batch_size": 3})
    first = await start_roles(("relay",), settings=small_batches)
    second = await start_roles(("relay",), settings=small_batches)
    worker = await start_roles(("worker",))
    account = await _load(pool, pipe_settings, submitter, merchant[0], sink.url)
    await _assert_exactly_once(pool, pipe_settings, merchant[0], account, sink)
    for running in (first, second, worker):
        await running.stop()
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0


class Crash(Exception):
    """Stands for the relay process dying after the confirms, before the marks commit."""


async def test_relay_dying_between_publish_and_mark_gives_a_duplicate_not_a_loss(
    pool: asyncpg.Pool,
    pipe_settings: Settings,
    submitter: DirectSubmitter,
    merchant: tuple[uuid.UUID, str],
    sink: WebhookSink,
    start_roles,
) -> None:
    payment_id = await submitter.submit_payment(merchant[0], "9.99", "USD", "k-crash", sink.url)
    connection = await connect(pipe_settings, name="crashing-relay")
    try:
        channel = await confirm_channel(connection)
        names = await declare_topology(channel, pipe_settings)
        exchange = await channel.get_exchange(names.exchange)
        confirmed: list[int] = []

        async def crash(ids: list[int]) -> None:
            confirmed.extend(ids)
            raise Crash

        with pytest.raises(Crash):
            await relay_once(
                pool,
                pipe_settings,
                exchange,
                database=pipe_settings,
                after_publish=crash,
                on_published=ON_PUBLISHED,
            )
        assert confirmed  # the broker has the message...
        # ...but the mark rolled back with the "crash": the row is still unpublished.
        assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 1
        queue = await channel.get_queue(names.queue("payments"))
        assert (await queue.declare()).message_count == 1
    finally:
        await connection.close()
    running = await start_roles()  # a fresh relay publishes it again: a duplicate
    await wait_until(
        lambda: pool.fetchval(
            "SELECT webhook_delivered_at IS NOT NULL FROM payments WHERE id = $1", payment_id
        ),
        what="delivery",
    )
    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 1 FROM balance_events"), what="credit"
    )
    await asyncio.sleep(0.3)  # let the duplicate be consumed too
    await running.stop()
    assert await pool.fetchval("SELECT count(*) FROM balance_events") == 1
    assert (
        await pool.fetchval("SELECT publish_attempts FROM outbox WHERE topic = 'payment.created'")
        == 1
    )
    assert len(sink.received) == 1


async def test_insufficient_funds_notifies_once_however_often_delivered(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    async with pool.acquire() as conn, transaction(conn, pipe_settings):
        account = await create_account(conn, "USD")
        await record_event(
            conn,
            event_id="wd-1",
            account_id=account.id,
            amount="5.00",
            event_type=EventType.WITHDRAWAL,
            scale=2,
        )
        for _ in range(3):  # the provider (or a replay) announced it three times
            await enqueue(conn, "ledger.event", {"version": 1, "event_id": "wd-1"})
    await post_opening(pipe_settings, account.id, Decimal("1.00"))  # the operator's act
    running = await start_roles()
    await wait_until(
        lambda: pool.fetchval(
            "SELECT status = 'failed' FROM payment_events WHERE event_id = 'wd-1'"
        ),
        what="refused withdrawal",
    )
    await wait_until(
        lambda: pool.fetchval("SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL"),
        what="outbox drained",
    )
    await asyncio.sleep(0.3)
    await running.stop()
    notes = await pool.fetch(
        "SELECT payload FROM outbox WHERE topic = 'notification.insufficient_funds'"
    )
    assert len(notes) == 1
    assert notes[0]["payload"]["event_id"] == "wd-1"
    assert await pool.fetchval("SELECT count(*) FROM dead_letter_queue") == 0
    assert await pool.fetchval("SELECT balance FROM accounts WHERE id = $1", account.id) == Decimal(
        "1.00"
    )


async def test_under_load_the_relay_lingers_so_rows_committed_meanwhile_share_a_batch(
    pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    """`RELAY_LINGER_MS`: after a pass that found rows, the busy relay claims again only
    a linger later (and so on while it stays busy). Five jobs committed one by one within
    less than one linger are then claimed, published and marked by at most TWO relay
    transactions (the burst may straddle one poll): the rows share at most two `xmin`s.
    Without the linger each commit would be its own pass. Every row is published once."""
    lingering = pipe_settings.model_copy(update={"relay_linger_ms": 400.0})
    connection = await connect(lingering, name="linger-relay")
    stop = asyncio.Event()

    async def one_job(n: int) -> int:
        async with pool.acquire() as conn, transaction(conn, lingering):
            return await enqueue(conn, "webhook.deliver", {"version": 1, "n": n})

    async def published(ids: list[int]) -> bool:
        unpublished = await pool.fetchval(
            "SELECT count(*) FROM outbox WHERE id = ANY($1) AND published_at IS NULL", ids
        )
        return unpublished == 0

    try:
        channel = await confirm_channel(connection)
        names = await declare_topology(channel, lingering)
        exchange = await channel.get_exchange(names.exchange)
        relay = asyncio.create_task(
            run_relay(
                pool, lingering, exchange, stop, database=lingering, on_published=ON_PUBLISHED
            )
        )
        first = [await one_job(0)]
        await wait_until(lambda: published(first))
        burst = []
        for n in range(1, 6):  # five commits, 40 ms apart: 160 ms, inside the linger
            burst.append(await one_job(n))
            await asyncio.sleep(0.04)
        await wait_until(lambda: published(burst))
    finally:
        stop.set()
        await relay
        await connection.close()
    batches = await pool.fetchval(
        "SELECT count(DISTINCT xmin::text) FROM outbox WHERE id = ANY($1)", burst
    )
    assert batches <= 2
    assert await pool.fetchval(
        "SELECT count(*) FROM outbox WHERE id = ANY($1) AND publish_attempts = 1", burst
    ) == len(burst)
