"""Broker connections: robust (reconnecting) and built by the caller, never at import.

A cluster's nodes (RABBITMQ_URLS) are tried in order. aio-pika's robust connection
reconnects to one URL only; `FailoverConnection` keeps its channel and consumer
recovery and moves to the next node on each failed attempt and on each lost connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aio_pika
import structlog
from aio_pika.connection import make_url
from yarl import URL

from payflow.config import BrokerSettings

log = structlog.get_logger("payflow.broker")


class FailoverConnection(aio_pika.RobustConnection):
    """A robust connection over several nodes of one cluster.

    aio-pika reads `url` once per connection attempt (in `Connection.connect`, with no
    transport yet) and otherwise only when the connection is built; `url` is the node
    in use, and an attempt that starts after a failed attempt or a lost connection
    moves to the next node first. Channels, exchanges, queues and consumers are
    restored on whichever node answers, as with one URL.
    """

    def __init__(self, urls: Sequence[URL], **kwargs: Any) -> None:
        if not urls:
            raise ValueError("FailoverConnection needs at least one URL")
        self._nodes: list[URL] = list(urls)
        self._node = 0
        self._advance = False  # the last attempt failed, or the connection was lost
        self._armed = False  # reads of `url` while building are not attempts
        super().__init__(self._nodes[0], **kwargs)
        self._armed = True

    @property
    def url(self) -> URL:
        """The node of the current (or next) connection attempt."""
        if self._armed and self.transport is None:
            # Only `Connection.connect` reads `url` while no transport is open: this
            # read starts an attempt. `_on_connected` clears `_advance` on success.
            if self._advance:
                self._node = (self._node + 1) % len(self._nodes)
                log.info("payflow.broker.next_node", node=self._masked(self._node))
            self._advance = True
        return self._nodes[self._node]

    @url.setter
    def url(self, value: URL) -> None:  # aio-pika sets it when built and on update_secret
        self._nodes[self._node] = URL(value)

    def _masked(self, index: int) -> str:
        url = self._nodes[index]
        return str(url.with_password("******") if url.password else url)

    def __str__(self) -> str:
        return self._masked(self._node)

    @property
    def node_index(self) -> int:
        """Which of the URLs (0-based) the connection uses or tries next."""
        return self._node

    async def _on_connected(self) -> None:
        self._advance = False
        await super()._on_connected()

    async def _on_connection_close(self, closing: Any) -> None:
        self._advance = True  # the node may be gone: the next attempt tries another
        await super()._on_connection_close(closing)


async def connect(settings: BrokerSettings, *, name: str) -> aio_pika.abc.AbstractRobustConnection:
    """A robust connection: after a loss it reconnects (to the next node of
    RABBITMQ_URLS) and restores channels and consumers.

    The first connect tries each node once, in order, each within
    BROKER_CONNECT_TIMEOUT_S, and raises the last node's error when none answers (the
    role's caller waits and calls again)."""
    urls = [make_url(url) for url in settings.broker_urls()]
    last: BaseException | None = None
    for first in range(len(urls)):
        connection = FailoverConnection(
            urls[first:] + urls[:first],
            client_properties={"connection_name": name},
            reconnect_interval=1,
        )
        try:
            await connection.connect(timeout=settings.broker_connect_timeout_s)
        except (OSError, aio_pika.exceptions.AMQPConnectionError) as exc:
            last = exc
            with contextlib.suppress(Exception):
                await connection.close()
            continue
        return connection
    assert last is not None
    raise last


async def confirm_channel(
    connection: aio_pika.abc.AbstractRobustConnection,
) -> aio_pika.abc.AbstractChannel:
    """A channel with publisher confirms on; an unroutable mandatory publish raises."""
    return await connection.channel(publisher_confirms=True, on_return_raises=True)


@contextlib.asynccontextmanager
async def short_connection(
    urls: str | Sequence[str], timeout_s: float
) -> AsyncIterator[aio_pika.Connection]:
    """A plain connection for one short look at the broker (readiness, queue depths),
    to the first of `urls` (one URL, or a cluster's nodes in order) that answers within
    `timeout_s`, closed when the block ends, on every path. The last node's error is
    raised when none answers.

    Even when the caller's timeout cancels the connect half-way, the connection is
    closed here: aio_pika closes a connection dropped unclosed from `__del__`, which
    outside a running loop leaves an un-awaited `close()` coroutine behind.
    """
    nodes = [urls] if isinstance(urls, str) else list(urls)
    connection: aio_pika.Connection | None = None
    try:
        for index, url in enumerate(nodes):
            connection = aio_pika.Connection(make_url(url))
            try:
                await connection.connect(timeout=timeout_s)
                break
            except (OSError, aio_pika.exceptions.AMQPConnectionError):
                with contextlib.suppress(Exception):
                    await connection.close()
                if index == len(nodes) - 1:
                    raise
        assert connection is not None
        yield connection
    finally:
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()
