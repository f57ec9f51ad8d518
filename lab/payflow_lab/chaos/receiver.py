"""The merchants' webhook endpoint of a chaos run: a small asyncio HTTP/1.1 server whose
behaviour is chosen per payment by the URL the load gave it.

`/ok/<key>` answers 200; `/flaky/<key>` answers 500 to the first POST, then 200;
`/slow/<key>` lets the first POST time out (it answers after `SLOW_S`, beyond the run's
WEBHOOK_TIMEOUT_S), then 200; `/dead/<key>` always answers 500, so that webhook must end
dead-lettered. Every POST is counted per key and per answer.

`/endpoint/all` is the merchant's webhook endpoint (every event type): it answers 200 and
counts each POST's `webhook-id` (the event id) in `endpoint_ids`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field

MODES = ("ok", "flaky", "slow", "dead")
SLOW_S = 2.0


@dataclass
class Receiver:
    """Listens on `host`:`port` once started; `posts[key]` counts POSTs per payment."""

    port: int = 0
    host: str = "127.0.0.1"  # the HA lab's receiver listens on its bridge address
    posts: Counter[str] = field(default_factory=Counter)
    answered_ok: Counter[str] = field(default_factory=Counter)
    endpoint_ids: Counter[str] = field(default_factory=Counter)
    _server: asyncio.AbstractServer | None = None

    def url(self, mode: str, key: str) -> str:
        """The webhook_url of a payment whose receiver behaves as `mode`."""
        return f"http://{self.host}:{self.port}/{mode}/{key}"

    def endpoint_url(self) -> str:
        """The URL of the merchant's webhook endpoint."""
        return f"http://{self.host}:{self.port}/endpoint/all"

    async def start(self) -> None:
        """Listen on an ephemeral port."""
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def _status(self, mode: str, key: str) -> tuple[int, float]:
        seen = self.posts[key]  # already counted: 1 on the first POST
        if mode == "dead" or (mode == "flaky" and seen == 1):
            return 500, 0.0
        if mode == "slow" and seen == 1:
            return 200, SLOW_S
        return 200, 0.0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = 0
                webhook_id = ""
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                    elif name.strip().lower() == "webhook-id":
                        webhook_id = value.strip()
                await reader.readexactly(length)
                parts = lines[0].split(" ")[1].strip("/").split("/")
                mode, key = [*parts, "", ""][:2]
                if mode == "endpoint":
                    self.endpoint_ids[webhook_id] += 1
                else:
                    self.posts[key] += 1
                status, delay = self._status(mode, key)
                if delay:
                    await asyncio.sleep(delay)
                writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n".encode())
                await writer.drain()
                if status == 200 and mode != "endpoint":
                    self.answered_ok[key] += 1
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            IndexError,
        ):
            pass
        finally:
            writer.close()
