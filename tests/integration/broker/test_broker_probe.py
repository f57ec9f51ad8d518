"""`short_connection`: the readiness check and the queue-depth reader open one AMQP
connection each, and close it on every path, also when a timeout cancels the connect
half-way. (Dropped unclosed, aio_pika closes it from `__del__`; outside a running loop
that leaves an un-awaited `close()` coroutine behind, which a later test then reports.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import ClassVar

import aio_pika
import pytest

from payflow.broker import connection as broker_connection
from payflow.broker.connection import short_connection
from payflow.config import load_settings


class Recorded(aio_pika.Connection):
    """A real aio_pika connection that remembers every instance made."""

    made: ClassVar[list[Recorded]] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        Recorded.made.append(self)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Recorded]:
    Recorded.made = []
    monkeypatch.setattr(broker_connection.aio_pika, "Connection", Recorded)
    return Recorded.made


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A TCP server that accepts and never says a word (a stalled broker)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


async def test_a_probe_of_the_real_broker_is_closed_after_the_block(
    recorded: list[Recorded],
) -> None:
    url = load_settings().rabbitmq_url
    async with short_connection(url, 5.0) as connection:
        assert not connection.is_closed
    assert len(recorded) == 1 and recorded[0].is_closed


async def test_its_own_timeout_closes_the_half_made_connection(
    recorded: list[Recorded], silent_port: int
) -> None:
    with pytest.raises(TimeoutError):
        async with short_connection(f"amqp://guest:guest@127.0.0.1:{silent_port}/", 0.3):
            pytest.fail("a silent server never completes the handshake")
    assert len(recorded) == 1 and recorded[0].is_closed


async def test_a_callers_timeout_closes_it_too(recorded: list[Recorded], silent_port: int) -> None:
    async def probe() -> None:
        async with short_connection(f"amqp://guest:guest@127.0.0.1:{silent_port}/", 30.0):
            pass

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(probe(), timeout=0.3)  # as the readiness check does
    assert len(recorded) == 1 and recorded[0].is_closed
