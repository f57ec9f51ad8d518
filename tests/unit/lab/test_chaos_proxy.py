"""The chaos run's TCP proxy forwards bytes both ways, and a cut resets every open
connection while new ones still go through."""

from __future__ import annotations

import asyncio

import pytest

from payflow_lab.chaos.proxy import ProxyThread


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def test_proxy_forwards_and_cut_resets_open_connections() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    proxies = ProxyThread()
    try:
        proxy = proxies.add("echo", server.sockets[0].getsockname()[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.readexactly(4), 10) == b"ping"

        await proxies.cut("echo")
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            writer.write(b"again")
            await writer.drain()
            await asyncio.wait_for(reader.readexactly(5), 10)
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"after")
        assert await asyncio.wait_for(reader.readexactly(5), 10) == b"after"
        writer.close()
    finally:
        proxies.close()
        server.close()
        await server.wait_closed()
