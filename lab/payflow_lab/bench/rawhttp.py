"""A minimal HTTP/1.1 keep-alive client for the bench driver, on asyncio streams.

httpx costs milliseconds of CPU per request on this class of machine, which at a few
hundred requests/s makes the driver, not the service, the bottleneck; this costs tens
of microseconds. It speaks just what the bench needs: POST with a body, responses
with a Content-Length, at most `max_connections` pooled connections to one host.

Invariant: a connection is reused only after its response was read completely; any
error or timeout closes it, so a half-read response can never leak into the next one.
Servers close idle keep-alive connections (uvicorn after 5 s): idle ones older than
`IDLE_REUSE_S` are dropped, and a reused one that fails is replaced and the request
sent once more. That resend is only safe because every bench request is idempotent
(an Idempotency-Key or a provider event id).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

IDLE_REUSE_S = 2.0


class HttpProtocolError(RuntimeError):
    """The server's answer is not HTTP/1.1 this client understands."""


@dataclass(frozen=True, slots=True)
class RawResponse:
    """Status, lower-cased headers and the body of one response."""

    status: int
    headers: dict[str, str]
    body: bytes


_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_STALE = (asyncio.IncompleteReadError, ConnectionError)


class RawHttpClient:
    """POSTs to one `host:port` over up to `max_connections` keep-alive connections."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        max_connections: int,
        headers: dict[str, str],
        timeout_s: float = 30.0,
    ) -> None:
        self._host, self._port, self._timeout = host, port, timeout_s
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[tuple[_Conn, float]] = []  # (connection, idle since)
        fixed = {"Host": f"{host}:{port}", **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> RawResponse:
        """Send one POST and read its whole response."""
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = f"POST {path} HTTP/1.1\r\n{self._fixed}{extra}Content-Length: {len(body)}\r\n\r\n"
        request = head.encode("latin-1") + body
        async with self._slots:
            conn = self._take_idle()
            if conn is not None:
                try:
                    return await self._send(conn, request)
                except _STALE:
                    pass  # the server closed it while idle: resend on a fresh connection
            try:
                return await self._send(await self._connect(), request)
            except asyncio.IncompleteReadError as error:
                raise HttpProtocolError("the server closed the connection mid-response") from error

    def _take_idle(self) -> _Conn | None:
        now = time.monotonic()
        while self._idle:
            conn, since = self._idle.pop()
            if now - since < IDLE_REUSE_S:
                return conn
            conn[1].close()
        return None

    async def _send(self, conn: _Conn, request: bytes) -> RawResponse:
        try:
            async with asyncio.timeout(self._timeout):
                response = await self._exchange(conn, request)
        except BaseException:
            conn[1].close()
            raise
        if response.headers.get("connection", "").lower() == "close":
            conn[1].close()
        else:
            self._idle.append((conn, time.monotonic()))
        return response

    async def _connect(self) -> _Conn:
        async with asyncio.timeout(self._timeout):
            return await asyncio.open_connection(self._host, self._port)

    @staticmethod
    async def _exchange(conn: _Conn, request: bytes) -> RawResponse:
        reader, writer = conn
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise HttpProtocolError(f"bad status line: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise HttpProtocolError("response without Content-Length")
        body = await reader.readexactly(int(headers["content-length"]))
        return RawResponse(int(parts[1]), headers, body)

    async def aclose(self) -> None:
        """Close every idle connection."""
        while self._idle:
            (_, writer), _since = self._idle.pop()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
