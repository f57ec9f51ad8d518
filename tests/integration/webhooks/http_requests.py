"""Reading one HTTP/1.1 request off a test receiver's stream (the raw servers of the
webhook client and pinning tests)."""

from __future__ import annotations

import asyncio


async def read_request(reader: asyncio.StreamReader) -> dict[str, str]:
    """The next request's headers (names lower-cased), its body read and dropped; raises
    `asyncio.IncompleteReadError` when the peer closes first."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in head.split("\r\n")[1:])
        if name
    }
    await reader.readexactly(int(headers.get("content-length", "0")))
    return headers
