"""A connection over several broker nodes (RABBITMQ_URLS), on the real RabbitMQ behind two
TCP proxies standing in for two nodes: the first connect skips a node that refuses, and
when the node in use goes away the connection moves to the next one by itself, with its
channel and consumer restored (messages published after the move are delivered)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import quote

import aio_pika

from payflow.broker import connect
from payflow.config import load_settings
from payflow_lab.chaos.proxy import TcpProxy
from tests.integration.support import wait_until as _wait


async def wait_until(check: Callable[[], bool], *, limit_s: float) -> None:
    """Poll the plain predicate `check` until it holds."""

    async def probe() -> bool:
        return check()

    await _wait(probe, limit_s=limit_s)


async def test_connection_skips_a_dead_node_and_moves_on_when_its_node_goes(vhost: str) -> None:
    first, second = TcpProxy("mq-a", 5672), TcpProxy("mq-b", 5672)
    await first.start()
    await second.start()
    path = quote(vhost, safe="")
    settings = load_settings(
        rabbitmq_urls=(
            f"amqp://guest:guest@127.0.0.1:1/{path}",  # a node that is down
            f"amqp://guest:guest@127.0.0.1:{first.port}/{path}",
            f"amqp://guest:guest@127.0.0.1:{second.port}/{path}",
        ),
        broker_connect_timeout_s=2.0,
    )
    received: list[bytes] = []
    connection = await connect(settings.broker, name="failover-test")
    try:
        assert (first.connections, second.connections) == (1, 0)
        channel = await connection.channel()
        queue = await channel.declare_queue("failover", durable=True)

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            async with message.process():
                received.append(message.body)

        await queue.consume(on_message)
        await channel.default_exchange.publish(aio_pika.Message(b"before"), routing_key="failover")
        await wait_until(lambda: received == [b"before"], limit_s=10)

        await first.close()  # the node in use is gone: listener closed, connection reset
        await wait_until(lambda: second.connections >= 1 and not connection.is_closed, limit_s=15)
        await wait_until(lambda: connection.connected.is_set(), limit_s=15)
        for _ in range(100):  # the channel and its consumer come back with the connection
            try:
                await channel.default_exchange.publish(
                    aio_pika.Message(b"after"), routing_key="failover"
                )
                break
            except (aio_pika.exceptions.AMQPError, RuntimeError, OSError):
                await asyncio.sleep(0.1)
        await wait_until(lambda: received == [b"before", b"after"], limit_s=15)
    finally:
        await connection.close()
        await second.close()
