"""httpx with many small connection pools instead of one large one, for hundreds of POSTs
in flight: the layout of `payflow bench webhooks`' bare httpx loop (the reference the
webhook sender is measured against; the sender itself uses aiohttp, `payflow.webhooks.client`).

httpcore's connection pool does bookkeeping over every connection and every waiting
request on each request and each release, so one pool of 256 connections spends its time
there: against a receiver answering after 1 s, one pool of 256 connections delivered
40 POSTs/s on this 2-core machine, eight pools of 32 delivered 178/s and 32 pools of 8
delivered 211/s (the bare asyncio ceiling was 246/s). `ShardedTransport` spreads requests
over several transports, each request to the one with the fewest requests open, so the
pools stay small and none fills while another idles.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import httpx

CONNECTIONS_PER_SHARD = 16


def shard_count(connections: int) -> int:
    """How many pools `connections` are split into (at most `CONNECTIONS_PER_SHARD` each)."""
    return max(1, -(-connections // CONNECTIONS_PER_SHARD))


class _CountedStream(httpx.AsyncByteStream):
    """A response body that gives its request's slot back when it is closed."""

    def __init__(self, inner: httpx.AsyncByteStream, release: ShardedTransport, index: int):
        self._inner = inner
        self._release = release
        self._index = index
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            if self._open:
                self._open = False
                self._release.done(self._index)


class ShardedTransport(httpx.AsyncBaseTransport):
    """Sends each request through the least busy of `transports` (requests open, counted
    until their response is closed). Closing closes them all."""

    def __init__(self, transports: Sequence[httpx.AsyncBaseTransport]) -> None:
        if not transports:
            raise ValueError("ShardedTransport needs at least one transport")
        self._transports = list(transports)
        self._open = [0] * len(self._transports)

    def done(self, index: int) -> None:
        """A request on shard `index` finished (its response closed)."""
        self._open[index] -= 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` through the shard with the fewest requests open."""
        index = min(range(len(self._open)), key=self._open.__getitem__)
        self._open[index] += 1
        try:
            response = await self._transports[index].handle_async_request(request)
        except BaseException:
            self.done(index)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CountedStream(response.stream, self, index),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        """Close every shard's pool."""
        for transport in self._transports:
            await transport.aclose()
