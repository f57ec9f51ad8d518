"""An outbox row the broker refuses backs off and alerts; it never blocks the rows behind."""

from __future__ import annotations

import asyncio

import asyncpg
from structlog.testing import capture_logs

from payflow.broker.connection import confirm_channel, connect
from payflow.broker.topology import TOPIC_WEBHOOK_DELIVER, declare_topology
from payflow.config import Settings
from payflow.ledger.announce import ON_PUBLISHED
from payflow.outbox.relay import relay_once
from payflow.outbox.waker import RelayWaker
from tests.integration.support import queue_depth, wait_until

UNROUTABLE = "no.queue.is.bound.to.this"
# A routed topic no worker of these tests consumes: its messages stay countable.
ROUTED = TOPIC_WEBHOOK_DELIVER


async def _insert_rows(pool: asyncpg.Pool, topic: str, count: int) -> None:
    await pool.executemany(
        "INSERT INTO outbox (topic, payload) VALUES ($1, $2)",
        [(topic, {"version": 1, "n": n}) for n in range(count)],
    )


async def test_more_unroutable_rows_than_a_batch_do_not_stop_the_relay(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    settings = pipe_settings.model_copy(update={"relay_batch_size": 5})
    await _insert_rows(pool, UNROUTABLE, 12)  # ahead of the good rows, lower ids
    await _insert_rows(pool, ROUTED, 3)
    await start_roles(("relay",), settings=settings)
    await wait_until(
        lambda: pool.fetchval(
            "SELECT count(*) = 3 FROM outbox WHERE topic = $1 AND published_at IS NOT NULL",
            ROUTED,
        ),
        what="good rows published past the unroutable ones",
    )
    assert await queue_depth(settings, "payflow.webhooks") == 3
    bad = await pool.fetch(
        "SELECT publish_attempts, next_attempt_at > now() AS backing_off, last_error, "
        "published_at FROM outbox WHERE topic = $1",
        UNROUTABLE,
    )
    assert len(bad) == 12
    for row in bad:
        assert row["published_at"] is None
        assert row["publish_attempts"] >= 1
        assert row["backing_off"]
        assert "NO_ROUTE" in row["last_error"]


async def test_refused_row_waits_a_doubling_capped_backoff(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings
) -> None:
    settings = pipe_settings.model_copy(
        update={"relay_retry_backoff_s": 10.0, "relay_retry_max_backoff_s": 100.0}
    )
    await _insert_rows(pool, UNROUTABLE, 1)
    await _insert_rows(pool, ROUTED, 1)
    connection = await connect(settings, name="test-relay")
    try:
        channel = await confirm_channel(connection)
        names = await declare_topology(channel, settings)
        exchange = await channel.get_exchange(names.exchange)
        first = await relay_once(
            pool, settings, exchange, database=settings, on_published=ON_PUBLISHED
        )
        assert (first.claimed, first.published, first.deferred) == (2, 1, 1)
        assert (
            await relay_once(pool, settings, exchange, database=settings, on_published=ON_PUBLISHED)
        ).claimed == 0  # not due yet
        waits = []
        for attempts in (1, 2, 3, 4):
            await owner_pool.execute(
                "UPDATE outbox SET next_attempt_at = now() WHERE published_at IS NULL"
            )
            with capture_logs() as logs:
                again = await relay_once(
                    pool, settings, exchange, database=settings, on_published=ON_PUBLISHED
                )
            assert (again.claimed, again.deferred) == (1, 1)
            alerts = [e for e in logs if e["event"] == "payflow.outbox.unpublishable"]
            # From RELAY_UNPUBLISHABLE_ALERT_ATTEMPTS (5) failures on, each one alerts.
            if attempts + 1 >= settings.relay_unpublishable_alert_attempts:
                assert [(a["topic"], a["attempts"]) for a in alerts] == [(UNROUTABLE, attempts + 1)]
            else:
                assert alerts == []
            row = await pool.fetchrow(
                "SELECT publish_attempts, "
                "extract(epoch FROM next_attempt_at - now())::float8 AS wait "
                "FROM outbox WHERE published_at IS NULL"
            )
            assert row["publish_attempts"] == attempts + 1
            waits.append(row["wait"])
        # 10 * 2^1, 2^2, 2^3, then the cap (100), give or take the pass's duration.
        for wait, expected in zip(waits, (20, 40, 80, 100), strict=True):
            assert expected - 5 < wait <= expected + 1
    finally:
        await connection.close()


async def _published(pool: asyncpg.Pool, marker: int) -> bool:
    return bool(
        await pool.fetchval(
            "SELECT published_at IS NOT NULL FROM outbox WHERE (payload->>'n')::int = $1",
            marker,
        )
    )


async def test_a_busy_relay_polls_without_wake_ups_and_an_idle_one_waits_for_one(
    pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    """With the fallback poll out of reach (an hour), rows committed without a NOTIFY are
    published while the relay is busy (each pass that finds rows polls again); once it
    has gone idle, such a row waits for a wake-up, and one NOTIFY publishes it."""
    # A long linger makes the busy window (BUSY_EMPTY_PASSES x linger = 1.2 s) far wider
    # than any gap between two inserts, even on a loaded machine.
    settings = pipe_settings.model_copy(
        update={"relay_poll_interval_s": 3600.0, "relay_linger_ms": 300.0}
    )
    await start_roles(("relay",), settings=settings)
    await pool.execute(
        "INSERT INTO outbox (topic, payload) VALUES ($1, $2)",
        ROUTED,
        {"version": 1, "n": 0},
    )
    await pool.execute("SELECT pg_notify('payflow_outbox', '')")  # row 0 is committed
    await wait_until(lambda: _published(pool, 0), what="the announced row published")
    # Busy: one row every 2 ms, none announced; the relay finds each in its next pass.
    for n in range(1, 100):
        await pool.execute(
            "INSERT INTO outbox (topic, payload) VALUES ($1, $2)",
            ROUTED,
            {"version": 1, "n": n},
        )
        await asyncio.sleep(0.002)
    await wait_until(lambda: _published(pool, 99), what="the busy stream published")
    assert await pool.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0
    # Idle now (well past the busy window): a silent row stays until a wake-up.
    await asyncio.sleep(3.0)
    await pool.execute(
        "INSERT INTO outbox (topic, payload) VALUES ($1, $2)",
        ROUTED,
        {"version": 1, "n": 1000},
    )
    await asyncio.sleep(1.0)
    assert not await _published(pool, 1000)
    async with RelayWaker(pool) as waker:
        waker.poke()
    await wait_until(lambda: _published(pool, 1000), what="the woken relay published")
    assert await queue_depth(settings, "payflow.webhooks") == 101
