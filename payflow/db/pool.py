"""Connection pools. Built by the caller (lifespan or CLI), never at import time.

Every pool works behind PgBouncer in transaction pooling: nothing session-level is set
on a connection (timeouts are `SET LOCAL`, advisory locks are transaction-scoped,
isolation comes with `BEGIN ISOLATION LEVEL …`), and `DB_STATEMENT_CACHE_SIZE=0`
turns asyncpg's named prepared statements off (with the cache off, asyncpg 0.29+ uses
the unnamed statement and parses it again in the Bind/Execute/Sync that runs it, so
no statement outlives the server round trip). The relay's LISTEN needs a real
session: it connects with `Settings.direct_url()` (DATABASE_DIRECT_URL).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import orjson
import structlog

from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.errors import (
    UNCONFIRMED_COMMIT_WARNING,
    CommitUnconfirmed,
    is_retryable,
    is_wrong_node,
)

log = structlog.get_logger("payflow.db")
T = TypeVar("T")


def json_text(value: object) -> str:
    """`value` as the text a json/jsonb parameter travels as (orjson; amounts inside are
    always strings): the pool's own encoder, for a payload sent as text (`::jsonb`)."""
    return orjson.dumps(value).decode()


async def _init_connection(conn: Connection) -> None:
    # jsonb/json travel through orjson; amounts inside are always strings.
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name,
            encoder=json_text,
            decoder=orjson.loads,
            schema="pg_catalog",
        )


class PrimaryConnection(asyncpg.Connection):
    """A pooled connection that answers for the node it is on.

    * It ends itself when a statement meets a node refusing writes (SQLSTATE 25006: a
      standby, or a primary being demoted under a DSN without
      `target_session_attrs=read-write`). The error still reaches the caller (retryable,
      `errors.is_wrong_node`); the pool then opens a new session in its place instead of
      handing the read-only one out again, so every later write does not fail the same way.
    * A statement (a COMMIT, or a statement that is its own transaction) whose commit the
      synchronous standby never confirmed raises `CommitUnconfirmed` instead of returning:
      PostgreSQL answers such a commit with success and a warning, and it does not survive
      a failover. The warning is read as it arrives, before the statement's own answer.
    """

    _unconfirmed_commit: str | None = None

    def _process_log_message(self, fields: dict[str, str], last_query: str | None) -> None:
        # Called by asyncpg's protocol for each NoticeResponse, synchronously, before the
        # statement's CommandComplete is read.
        if fields.get("M", "").startswith(UNCONFIRMED_COMMIT_WARNING):
            self._unconfirmed_commit = fields["M"]
        super()._process_log_message(fields, last_query)  # type: ignore[misc]

    async def _checked(self, call: Awaitable[T]) -> T:
        self._unconfirmed_commit = None
        try:
            result = await call
        except asyncpg.PostgresError as exc:
            self._drop_if_wrong_node(exc)
            raise
        if self._unconfirmed_commit is not None:
            warning, self._unconfirmed_commit = self._unconfirmed_commit, None
            log.warning("payflow.db.commit_unconfirmed", warning=warning[:200])
            raise CommitUnconfirmed(
                "the commit was not confirmed by the synchronous standby; retry it"
            )
        return result

    async def execute(self, query: str, *args: Any, **options: Any) -> str:
        """`asyncpg.Connection.execute`, checked (see the class)."""
        return await self._checked(super().execute(query, *args, **options))

    async def fetch(self, query: str, *args: Any, **options: Any) -> list[Any]:
        """`asyncpg.Connection.fetch`, checked (see the class)."""
        return await self._checked(super().fetch(query, *args, **options))

    async def fetchrow(self, query: str, *args: Any, **options: Any) -> Any:
        """`asyncpg.Connection.fetchrow`, checked (see the class)."""
        return await self._checked(super().fetchrow(query, *args, **options))

    async def fetchval(self, query: str, *args: Any, **options: Any) -> Any:
        """`asyncpg.Connection.fetchval`, checked (see the class)."""
        return await self._checked(super().fetchval(query, *args, **options))

    async def executemany(self, command: str, args: Any, **options: Any) -> None:
        """`asyncpg.Connection.executemany`, checked (see the class)."""
        await self._checked(super().executemany(command, args, **options))

    def _drop_if_wrong_node(self, exc: asyncpg.PostgresError) -> None:
        if is_wrong_node(exc) and not self.is_closed():
            log.warning("payflow.db.session_on_standby", error=str(exc)[:200])
            self.terminate()


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release hook for pools that never change session state: asyncpg has already
    rolled back any open transaction, so only the RESET ALL / UNLISTEN round trip
    is skipped."""


async def create_pool(
    settings: DatabaseSettings,
    *,
    dsn: str | None = None,
    min_size: int | None = None,
    max_size: int | None = None,
    reset_session: bool = True,
) -> asyncpg.Pool:
    """Open a pool on `dsn` (default DATABASE_URL), `min_size`..`max_size` connections
    (default DB_POOL_MIN..DB_POOL_MAX), asyncpg's statement cache sized by
    DB_STATEMENT_CACHE_SIZE (0 behind PgBouncer in transaction pooling). Nothing
    session-level is set, so PgBouncer transaction pooling works.

    `reset_session=False` skips the per-release reset query (one round trip per
    acquire); only for callers that never change session state (LISTEN, SET, session
    advisory locks), such as the HTTP API, the workers and the ledger benchmark.
    """
    pool = await asyncpg.create_pool(
        dsn or settings.database_url,
        min_size=min_size or settings.db_pool_min,
        max_size=max_size or settings.db_pool_max,
        init=_init_connection,
        reset=None if reset_session else _keep_session,
        statement_cache_size=settings.db_statement_cache_size,
        connection_class=PrimaryConnection,
    )
    assert pool is not None
    return pool


@asynccontextmanager
async def tool_pool(
    settings: DatabaseSettings, *, operator: bool = False
) -> AsyncIterator[asyncpg.Pool]:
    """A small pool for one CLI command, closed when the command is done.

    `operator=True` logs in with the migration login (`MIGRATION_DATABASE_URL`) instead of
    the service's role: for commands that change reference data the service may only read
    (the token registry, per-asset limits).
    """
    dsn = settings.migration_url() if operator else None
    pool = await create_pool(settings, dsn=dsn, min_size=1, max_size=2)
    try:
        yield pool
    finally:
        await pool.close()


async def open_pool_when_ready(
    settings: DatabaseSettings, stop: asyncio.Event, *, backoff_s: float = 1.0, **options: Any
) -> asyncpg.Pool | None:
    """`create_pool(settings, **options)`, retried every `backoff_s` seconds while
    PostgreSQL refuses or is unreachable (a role started during an outage waits for it
    instead of exiting). Returns None when `stop` is set first. A non-retryable error
    (bad credentials, unknown database) is raised at once."""
    while not stop.is_set():
        try:
            return await create_pool(settings, **options)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            log.warning("payflow.db.connect_failed", error=f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=backoff_s)
    return None
