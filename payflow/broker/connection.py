"""Broker connections: robust (reconnecting) and built by the caller, never at import."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aio_pika
from aio_pika.connection import make_url

from payflow.config import BrokerSettings


async def connect(settings: BrokerSettings, *, name: str) -> aio_pika.abc.AbstractRobustConnection:
    """A robust connection: after a loss it reconnects and restores channels and consumers."""
    connection = await aio_pika.connect_robust(
        settings.rabbitmq_url,
        client_properties={"connection_name": name},
        reconnect_interval=1,
    )
    return connection


async def confirm_channel(
    connection: aio_pika.abc.AbstractRobustConnection,
) -> aio_pika.abc.AbstractChannel:
    """A channel with publisher confirms on; an unroutable mandatory publish raises."""
    return await connection.channel(publisher_confirms=True, on_return_raises=True)


@contextlib.asynccontextmanager
async def short_connection(url: str, timeout_s: float) -> AsyncIterator[aio_pika.Connection]:
    """A plain connection for one short look at the broker (readiness, queue depths),
    connected within `timeout_s` and closed when the block ends, on every path.

    Even when the caller's timeout cancels the connect half-way, the connection is
    closed here: aio_pika closes a connection dropped unclosed from `__del__`, which
    outside a running loop leaves an un-awaited `close()` coroutine behind.
    """
    connection = aio_pika.Connection(make_url(url))
    try:
        await connection.connect(timeout=timeout_s)
        yield connection
    finally:
        with contextlib.suppress(Exception):
            await connection.close()
