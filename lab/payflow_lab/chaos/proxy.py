"""A small asyncio TCP proxy that can stall or cut every connection through it.

No well-kept proxy is installable here (Debian has no `toxiproxy`), so this is the
asyncio one the issue allows. The proxies of a run share one event loop on a thread
of their own (`ProxyThread`), so the load generator's loop cannot starve them and the
faults can be driven from any thread.

* `stall(seconds)`: bytes stop flowing in both directions for that long (connections
  stay open; a client sees a hang, as with a network partition that heals);
* `cut()`: every open connection is reset at once (new ones are accepted).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from payflow_lab.ports import free_port

CHUNK = 65536
T = TypeVar("T")


class TcpProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port`; runs on the proxy loop."""

    def __init__(self, name: str, target_port: int) -> None:
        self.name = name
        self.target_port = target_port
        self.port = free_port()
        self._open = asyncio.Event()
        self._open.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.AbstractServer | None = None
        self.connections = 0

    async def start(self) -> None:
        """Listen on `port`."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def close(self) -> None:
        """Stop listening and reset every connection."""
        if self._server is not None:
            self._server.close()
        await self.cut()

    async def stall(self, seconds: float) -> None:
        """Hold every byte in both directions for `seconds`."""
        self._open.clear()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._open.set()

    async def cut(self) -> None:
        """Reset every open connection (SO_LINGER 0: the peer sees ECONNRESET)."""
        for writer in list(self._writers):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    )
            writer.transport.abort()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            for one in (writer, up_writer):
                self._writers.discard(one)
                one.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                await self._open.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()  # one side gone: the other goes too


class ProxyThread:
    """An event loop on a daemon thread hosting the run's proxies."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.proxies: dict[str, TcpProxy] = {}

    def _call(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def add(self, name: str, target_port: int) -> TcpProxy:
        """Start a proxy named `name` in front of `target_port`; returns it (see `.port`)."""

        async def make() -> TcpProxy:
            proxy = TcpProxy(name, target_port)
            await proxy.start()
            return proxy

        proxy = self._call(make()).result(timeout=10)
        self.proxies[name] = proxy
        return proxy

    async def stall(self, name: str, seconds: float) -> None:
        """Stall proxy `name` for `seconds` (awaitable from any loop)."""
        await asyncio.wrap_future(self._call(self.proxies[name].stall(seconds)))

    async def cut(self, name: str) -> None:
        """Reset every connection through proxy `name`."""
        await asyncio.wrap_future(self._call(self.proxies[name].cut()))

    def close(self) -> None:
        """Close every proxy and stop the loop."""
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                self._call(proxy.close()).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
