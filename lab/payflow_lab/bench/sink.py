"""A tiny asyncio HTTP/1.1 server that records webhook POSTs (the bench's and the tests'
receiver): no framework, keep-alive, answers with a configurable status after an optional
delay (a slow merchant), and counts the requests it holds at once (`peak_in_flight`)."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe


@dataclass(slots=True)
class Received:
    """One request as the sink saw it."""

    headers: dict[str, str]
    body: bytes
    at: float
    path: str = "/hook"


@dataclass
class WebhookSink:
    """Answers every POST with `status_for(request)` (200 by default), `delay_s` seconds
    after reading it, and records it."""

    status_for: Callable[[Received], int] = field(default=lambda _r: 200)
    keep_bodies: bool = True
    delay_s: float = 0.0
    in_flight: int = 0
    peak_in_flight: int = 0
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.AbstractServer | None = None
    port: int = 0

    @property
    def url(self) -> str:
        """Where to POST (the path `/hook`)."""
        return self.url_at("/hook")

    def url_at(self, path: str) -> str:
        """Where to POST so that the requests carry `path` (starting with `/`)."""
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Received]:
        """The requests received on `path`."""
        return [r for r in self.received if r.path == path]

    async def start(self) -> None:
        """Listen on an ephemeral port of 127.0.0.1."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                target = lines[0].split(" ")
                request = Received(
                    headers,
                    body if self.keep_bodies else b"",
                    time.monotonic(),
                    target[1] if len(target) > 1 else "",
                )
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                try:
                    if self.delay_s > 0:
                        await asyncio.sleep(self.delay_s)
                finally:
                    self.in_flight -= 1
                status = self.status_for(request)
                self.received.append(request)
                self.arrived.set()
                writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n".encode("latin-1"))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def wait_for(self, count: int, limit_s: float = 30.0) -> None:
        """Wait until `count` requests arrived."""
        deadline = time.monotonic() + limit_s
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"sink got {len(self.received)} of {count} webhooks")
            await asyncio.sleep(0.02)


@dataclass(frozen=True, slots=True)
class SinkStats:
    """What a `SinkProcess` saw: requests answered, the most held at once, and the
    distinct `webhook-id` headers among them."""

    answered: int
    peak_in_flight: int
    distinct_ids: int


def _sink_main(delay_s: float, pipe: Pipe) -> None:
    async def main() -> None:
        sink = WebhookSink(keep_bodies=False, delay_s=delay_s)
        await sink.start()
        pipe.send(sink.port)
        await asyncio.to_thread(pipe.recv)  # anything means stop
        ids = {r.headers.get("webhook-id") for r in sink.received}
        pipe.send(SinkStats(len(sink.received), sink.peak_in_flight, len(ids - {None})))
        pipe.close()
        # The parent has what it needs: leave without cancelling open keep-alive handlers
        # (asyncio would print each cancellation).
        os._exit(0)

    asyncio.run(main())


class SinkProcess:
    """A `WebhookSink` answering after `delay_s`, in its own OS process, so the receiver's
    CPU is not the sender's; `stop()` returns its `SinkStats`."""

    def __init__(self, delay_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._pipe, child = ctx.Pipe()
        self._process = ctx.Process(target=_sink_main, args=(delay_s, child), daemon=True)
        self._process.start()
        self.url = f"http://127.0.0.1:{self._pipe.recv()}/hook"

    def stop(self) -> SinkStats:
        """Stop the receiver and return what it saw."""
        self._pipe.send("stop")
        stats: SinkStats = self._pipe.recv()
        self._process.join(timeout=10)
        return stats
