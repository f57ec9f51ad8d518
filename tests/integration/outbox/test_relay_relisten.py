"""The relay's LISTEN session ended under it (pg_terminate_backend, a failover) while the
relay idles: it listens again at once, so a row committed next is relayed on its NOTIFY,
not after the fallback poll (a minute here)."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from payflow.broker.topology import TOPIC_WEBHOOK_DELIVER
from payflow.config import Settings
from tests.integration.support import wait_until

LISTENING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
)


async def test_a_terminated_listen_session_is_listened_again_at_once(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    settings = pipe_settings.model_copy(update={"relay_poll_interval_s": 60.0})
    await start_roles(("relay",), settings=settings)
    await wait_until(lambda: owner_pool.fetchval(LISTENING), what="the relay listens")
    first = await owner_pool.fetchval(LISTENING)
    await asyncio.sleep(1)  # the relay idles, waiting for a NOTIFY or the poll
    assert await owner_pool.fetchval("SELECT pg_terminate_backend($1)", first)
    await wait_until(
        lambda: owner_pool.fetchval(LISTENING + " AND pid <> $1", first),
        what="the relay listens again on a new session",
    )
    await asyncio.sleep(0.5)
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchval(
            "INSERT INTO outbox (topic, payload) VALUES ($1, $2) RETURNING id",
            TOPIC_WEBHOOK_DELIVER,
            {"version": 1, "n": 1},
        )
        await conn.execute("SELECT pg_notify('payflow_outbox', '')")
    started = time.monotonic()
    while time.monotonic() - started < 15:
        if await pool.fetchval("SELECT published_at IS NOT NULL FROM outbox WHERE id = $1", row):
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError("the row waited for the poll: its NOTIFY was not heard")


async def test_the_relay_keeps_relaying_after_its_listen_session_ended(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, pipe_settings: Settings, start_roles
) -> None:
    """The pool takes a lost session's connection back itself, and the proxy the relay held
    then raised on `is_closed`: every later pass failed before claiming a row."""
    settings = pipe_settings.model_copy(update={"relay_poll_interval_s": 1.0})
    await start_roles(("relay",), settings=settings)
    first = await wait_until(lambda: owner_pool.fetchval(LISTENING), what="the relay listens")
    assert await owner_pool.fetchval("SELECT pg_terminate_backend($1)", first)
    await asyncio.sleep(2)
    row = await pool.fetchval(
        "INSERT INTO outbox (topic, payload) VALUES ($1, $2) RETURNING id",
        TOPIC_WEBHOOK_DELIVER,
        {"version": 1, "n": 2},
    )
    await wait_until(
        lambda: pool.fetchval("SELECT published_at IS NOT NULL FROM outbox WHERE id = $1", row),
        limit_s=20,
        what="the row relayed after the LISTEN session ended",
    )
