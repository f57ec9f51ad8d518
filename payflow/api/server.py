"""Process-level entry points for `payflow api` and `payflow merchants`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from uuid import UUID

import asyncpg
import uvicorn

from payflow.config import ApiSettings, DatabaseSettings, Settings, SettingsError
from payflow.db.pool import open_pool_when_ready, tool_pool
from payflow.db.tx import transaction
from payflow.ingress.signature import require_secret

from .auth import create_merchant
from .connections import PROTOCOL, ConnectionLimits, GuardedHttpToolsProtocol, raise_open_file_limit
from .db import connection

APP_FACTORY = "payflow.app:create_app"  # the composition root's: API and console


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


async def _wait_for_postgres(settings: Settings) -> None:
    pool = await open_pool_when_ready(settings.database, asyncio.Event(), min_size=1, max_size=1)
    if pool is not None:
        try:
            await require_fiat_assets(pool, settings.api)
        finally:
            await pool.close()


async def require_fiat_assets(pool: asyncpg.Pool, settings: ApiSettings) -> None:
    """Raise `SettingsError` naming FIAT_CURRENCIES when one of them has no `assets` row:
    a payment in it could never be accepted (with `FIAT_CURRENCIES=USD,GBP` and no GBP
    row, the API does not start, rather than answer every GBP payment 422 blaming
    `body.amount`)."""
    missing = await pool.fetch(
        "SELECT c FROM unnest($1::text[]) AS c"
        " WHERE NOT EXISTS (SELECT 1 FROM assets WHERE code = c) ORDER BY c",
        list(settings.fiat_currencies),
    )
    if missing:
        names = ", ".join(row["c"] for row in missing)
        raise SettingsError(
            f"setting FIAT_CURRENCIES is invalid: no asset {names} (add it first, or leave it out)"
        )


def serve(settings: Settings, *, host: str | None, port: int | None, workers: int | None) -> None:
    """Run uvicorn with the app factory; each worker builds its own pool in the lifespan.

    A missing or short provider secret raises `SettingsError` before anything starts.
    With several workers, Prometheus runs in multiprocess mode over a private directory.
    """
    require_secret(settings.ingress)
    # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown; with these handlers
    # in place beforehand, that ends the process with exit code 0 instead of -15.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_cleanly)
    # Started during a PostgreSQL outage: wait for it here (SIGTERM still exits 0) rather
    # than let every worker's lifespan fail and uvicorn exit 1.
    try:
        asyncio.run(_wait_for_postgres(settings))
    except asyncpg.PostgresError as error:  # e.g. the database was never migrated
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"payflow: the database refused the API: {first}", file=sys.stderr)
        raise SystemExit(1) from None
    # Slow clients (slowloris) meet read deadlines and a connection cap below the
    # open-file limit, raised to the hard limit first (worker processes inherit it).
    raise_open_file_limit()
    GuardedHttpToolsProtocol.configure(ConnectionLimits.of(settings))
    count = workers or settings.api_workers
    if count > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="payflow-metrics-")
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        host=host or settings.api_host,
        port=port or settings.api_port,
        workers=count,
        loop="uvloop",
        http=PROTOCOL,
        access_log=False,
        log_level="warning",
        proxy_headers=False,
    )


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the process that embeds it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def in_process_server(settings: Settings) -> uvicorn.Server:
    """One uvicorn server for `payflow up`; the caller sets `should_exit` to stop it.

    A missing or short provider secret raises `SettingsError` before anything starts.
    """
    require_secret(settings.ingress)
    raise_open_file_limit()
    GuardedHttpToolsProtocol.configure(ConnectionLimits.of(settings))
    config = uvicorn.Config(
        APP_FACTORY,
        factory=True,
        host=settings.api_host,
        port=settings.api_port,
        loop="none",
        http=PROTOCOL,
        access_log=False,
        log_level="warning",
        proxy_headers=False,
    )
    return _EmbeddedServer(config)


async def create_merchant_cli(
    settings: DatabaseSettings, name: str, *, admin: bool
) -> tuple[UUID, str, str]:
    """Create a merchant in its own transaction; returns (id, api key, webhook secret)."""
    async with tool_pool(settings) as pool, connection(pool) as conn:
        async with transaction(conn, settings):
            return await create_merchant(conn, name, admin=admin)


async def check_fiat_assets(settings: Settings) -> None:
    """`require_fiat_assets` on a short-lived pool, for commands that start the API role."""
    async with tool_pool(settings.database) as pool:
        await require_fiat_assets(pool, settings.api)
