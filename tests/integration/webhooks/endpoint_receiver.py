"""A merchant's HTTP server for the endpoint tests: an aiohttp app on a free port that
records every POST (path, headers, raw body) and answers per path as told (a status, or
hold the request open until released)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web
from standardwebhooks.webhooks import Webhook

from payflow_lab.ports import free_port


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    def verifies_with(self, secret: str) -> bool:
        """True when the `standardwebhooks` library accepts it under `secret`."""
        try:
            Webhook(secret).verify(self.body, self.headers)
        except Exception:
            return False
        return True


@dataclass(slots=True)
class Receiver:
    """POSTs to `/<name>` are recorded; `status[name]` answers them (default 200); a name
    in `hold` keeps its requests open until `release` is set."""

    port: int = field(default_factory=free_port)
    received: list[Received] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)
    hold: set[str] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def at(self, name: str) -> list[Received]:
        return [r for r in self.received if r.path == f"/{name}"]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        name = request.path.lstrip("/")
        self.received.append(
            Received(request.path, {k.lower(): v for k, v in request.headers.items()}, body)
        )
        if name in self.hold:
            await self.release.wait()
        return web.Response(status=self.status.get(name, 200))

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()
