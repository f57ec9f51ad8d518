"""Explicit transaction boundaries with per-transaction timeouts.

`transaction(conn, settings)` is how payflow opens a transaction. It begins and
sets `lock_timeout` and `statement_timeout` with SET LOCAL semantics in a single
round trip, so no session state leaks through a transaction pooler (PgBouncer).
It commits when the block ends normally and rolls back on any exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import structlog

from payflow.config import DatabaseSettings
from payflow.db import Connection

log = structlog.get_logger("payflow.db")

Isolation = Literal["read committed", "repeatable read", "serializable"]


@dataclass(frozen=True, slots=True)
class StatementBounds:
    """How long ONE statement sent outside a transaction (it is its own) may wait.

    No `SET LOCAL` covers such a statement, and whatever it sets itself applies only
    once it runs: PostgreSQL takes its table locks earlier, while it parses and plans.
    So the statement is bounded twice:

    * `statement_timeout_ms`, client side, as a whole: asyncpg's `timeout` cancels it on
      the server and raises `TimeoutError` (retryable); that covers a table lock held by
      a migration or an operator's `LOCK TABLE`, and a slow plan alike;
    * `lock_timeout_ms`, server side, for row-lock waits: the statement's first CTE sets
      it for its own implicit transaction (55P03, retryable), a clean early answer.

    A statement stopped either way rolls back and writes nothing. One edge remains: the
    client's timeout can race the server's commit (asyncpg raises at once and cancels in
    the background), so a `TimeoutError` may follow a committed statement. Every step
    that uses this tolerates that, because its retry is idempotent: a create replays, a
    finalize finds the payment final, a claim's lease expires and is taken over, an
    attempt record stands and the sweep re-announces its job.

    What this does not bound: a server that stops answering altogether (the cancel
    itself then waits for TCP), as before.
    """

    lock_timeout_ms: int
    statement_timeout_ms: int

    @classmethod
    def of(cls, settings: DatabaseSettings) -> StatementBounds:
        """`LOCK_TIMEOUT_MS` and `STATEMENT_TIMEOUT_MS`, the bounds of every transaction."""
        return cls(int(settings.lock_timeout_ms), int(settings.statement_timeout_ms))

    @property
    def timeout_s(self) -> float:
        """`statement_timeout_ms` in seconds, for asyncpg's `timeout=`."""
        return self.statement_timeout_ms / 1000


def _begin_statement(
    settings: DatabaseSettings,
    isolation: Isolation,
    readonly: bool,
    statement_timeout_ms: int | None,
) -> str:
    mode = " READ ONLY" if readonly else ""
    statement_timeout = statement_timeout_ms or settings.statement_timeout_ms
    # Both timeouts are validated integers from Settings, so inlining them is safe; it
    # lets BEGIN and the SET LOCALs travel in one simple-protocol round trip.
    return (
        f"BEGIN ISOLATION LEVEL {isolation.upper()}{mode};"
        f" SET LOCAL lock_timeout = {int(settings.lock_timeout_ms)};"
        f" SET LOCAL statement_timeout = {int(statement_timeout)}"
    )


@asynccontextmanager
async def transaction(
    conn: Connection,
    settings: DatabaseSettings,
    *,
    isolation: Isolation = "read committed",
    readonly: bool = False,
    statement_timeout_ms: int | None = None,
) -> AsyncIterator[Connection]:
    """Run the block in one transaction on `conn`: commit on success, roll back on error.

    Invariant: every statement in the block shares one snapshot of atomicity; either all
    of its writes commit or none do.
    """
    try:
        # Inside the `try`: a BEGIN that raises after the server began (a warning meant
        # for an earlier statement, `CommitUnconfirmed`) still ends the transaction.
        await conn.execute(_begin_statement(settings, isolation, readonly, statement_timeout_ms))
        yield conn
    except BaseException as original:
        await _roll_back(conn, original)
        raise
    await conn.execute("COMMIT")


async def _roll_back(conn: Connection, original: BaseException) -> None:
    """ROLLBACK after `original` ended the block; nothing it raises replaces `original`.

    On a lost session the ROLLBACK itself fails, with whatever the driver's state
    machine makes of it (`InterfaceError`, `InternalClientError` "cannot switch to
    state …", a reset): the server rolls back a transaction whose session ended, and the
    caller must see why the block failed, not why the clean-up could not run.
    """
    try:
        if conn.is_closed():
            return
        await conn.execute("ROLLBACK")
    except asyncio.CancelledError:
        raise  # a stop during the clean-up still stops; asyncpg closes the connection
    except Exception as exc:  # the original error is raised by the caller
        log.debug(
            "payflow.db.rollback_failed",
            error=f"{type(exc).__name__}: {exc}"[:300],
            original=type(original).__name__,
        )
