"""The bench's raw HTTP/1.1 client over real sockets: keep-alive reuse, and a resend
when the server closed an idle connection (as uvicorn does after its keep-alive)."""

from __future__ import annotations

import asyncio

from payflow_lab.bench.rawhttp import RawHttpClient
from payflow_lab.bench.sink import WebhookSink


async def test_keep_alive_reuses_one_connection() -> None:
    sink = WebhookSink(status_for=lambda r: 202)
    await sink.start()
    client = RawHttpClient("127.0.0.1", sink.port, max_connections=1, headers={"X-A": "1"})
    try:
        for i in range(3):
            response = await client.post("/hook", b'{"n": %d}' % i, {"Idempotency-Key": str(i)})
            assert response.status == 202
            assert response.body == b""
    finally:
        await client.aclose()
        await sink.stop()
    assert [r.body for r in sink.received] == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}']
    assert sink.received[2].headers["idempotency-key"] == "2"
    assert sink.received[0].headers["x-a"] == "1"


async def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    connections = 0

    async def one_request_then_close(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        nonlocal connections
        connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()  # no `Connection: close`: the client learns it on reuse

    server = await asyncio.start_server(one_request_then_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = RawHttpClient("127.0.0.1", port, max_connections=1, headers={})
    try:
        first = await client.post("/x", b"a", {})
        await asyncio.sleep(0.05)
        second = await client.post("/x", b"b", {})
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert (first.status, first.body) == (202, b"{}")
    assert (second.status, second.body) == (202, b"{}")
    assert connections == 2
