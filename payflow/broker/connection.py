"""Broker connections: robust (reconnecting) and built by the caller, never at import."""

from __future__ import annotations

import aio_pika

from payflow.config import Settings


async def connect(settings: Settings, *, name: str) -> aio_pika.abc.AbstractRobustConnection:
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
