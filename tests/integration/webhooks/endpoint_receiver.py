"""What the endpoint tests share: a merchant's HTTP server (an aiohttp app on a free port
that records every POST, its path, headers and raw body, and answers per path as told: a
status, or hold the request open until released), its fixture, and the set-up helpers
(merchants, endpoints, events recorded through `record_event` in a transaction)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
from aiohttp import web
from standardwebhooks.webhooks import Webhook

from payflow.api.auth import create_merchant, new_webhook_secret
from payflow.webhooks import EventKind, record_event
from payflow.webhooks.endpoints import create_endpoint
from payflow_lab.ports import free_port
from tests.integration.support import Running

Start = Callable[..., Awaitable[Running]]
DATA = {"payment_id": "p", "amount": "10.00", "currency": "RUB"}


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


async def _merchant(pool: asyncpg.Pool, name: str) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn:
        merchant_id, key, _ = await create_merchant(conn, name, admin=False)
    return merchant_id, key


async def _endpoint(
    pool: asyncpg.Pool, merchant_id: uuid.UUID, url: str, events: list[str], *, enabled: bool = True
) -> tuple[uuid.UUID, str]:
    secret = new_webhook_secret()
    async with pool.acquire() as conn:
        row = await create_endpoint(
            conn, merchant_id, url=url, events=events, secret=secret, enabled=enabled
        )
    return row["id"], secret


async def _event(
    pool: asyncpg.Pool, merchant_id: uuid.UUID, kind: EventKind, subject: str | None = None
) -> str:
    async with pool.acquire() as conn, conn.transaction():
        event_id = await record_event(conn, merchant_id, kind, subject or uuid.uuid4().hex, DATA)
    assert event_id is not None
    return event_id


async def _delivered(pool: asyncpg.Pool, event_id: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1 AND state = 'delivered'",
            event_id,
        )
    )


async def _async(value: bool) -> bool:
    return value
