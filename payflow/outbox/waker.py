"""Wake the relay after commit, coalesced: at most one NOTIFY per interval per process.

A NOTIFY inside a transaction is cheap to write but not to commit: PostgreSQL serializes
every notifying commit on one cluster-wide lock, held through the commit's WAL flush,
so a payment API whose every create notifies queues its commits behind each other. The
API's create statement therefore leaves the NOTIFY out (`create_payment(notify=False)`)
and, once the statement has committed, pokes this waker instead.

`RelayWaker.poke()` never blocks and never fails the caller. The first poke after a
quiet `interval_s` sends a NOTIFY at once (a lone payment is published as fast as with
the NOTIFY in its own commit); pokes during that interval are folded into one NOTIFY at
its end. Under load the relay polls on its own while passes find rows (`run_relay`), so
the folded wake-ups cost nothing; they matter only for a relay that went idle.

Invariant: a wake-up is a hint. The outbox row is committed before the poke; a NOTIFY
that fails or is lost delays the row by at most `RELAY_POLL_INTERVAL_S` (the relay's
fallback poll), and never loses it.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import structlog

from payflow.db.queries import load_queries

SQL = load_queries("payflow.outbox")
log = structlog.get_logger("payflow.outbox")

DEFAULT_INTERVAL_S = 0.02
SEND_TIMEOUT_S = 2.0


class RelayWaker:
    """Coalesced, after-commit relay wake-ups for one process (see the module docstring).

    `interval_s` (seconds, > 0) is the shortest gap between two NOTIFYs this waker sends.
    Use `async with RelayWaker(pool):` or call `close()`: a wake-up still pending is sent
    before the waker closes.
    """

    def __init__(self, pool: asyncpg.Pool, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self._pool = pool
        self._interval_s = interval_s
        self._last_sent = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False
        self.sent = 0  # NOTIFYs sent, for tests and the bench

    async def __aenter__(self) -> RelayWaker:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    def poke(self) -> None:
        """Ask for a wake-up; call only after the outbox row's transaction committed.
        After `close()` a poke does nothing (the relay's poll still finds the row)."""
        if self._closed:
            return
        if self._task is not None and not self._task.done():
            self._again = True  # folded into the pending or the next send
            return
        self._task = asyncio.get_running_loop().create_task(self._send_soon())

    async def _send_soon(self) -> None:
        while True:
            wait = self._last_sent + self._interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            # Every poke so far followed its commit: this NOTIFY covers them all. A poke
            # while it is on the way asks for one more round.
            self._again = False
            self._last_sent = time.monotonic()
            await self._notify()
            if not self._again:
                return

    async def _notify(self) -> None:
        try:
            async with self._pool.acquire(timeout=SEND_TIMEOUT_S) as conn:
                await conn.execute(SQL["wake_relay"], timeout=SEND_TIMEOUT_S)
            self.sent += 1
        except Exception as exc:  # a hint: the relay's poll finds the rows anyway
            log.warning("payflow.outbox.wake_failed", error=f"{type(exc).__name__}: {exc}")

    async def close(self) -> None:
        """Send a pending wake-up (bounded by the interval and twice `SEND_TIMEOUT_S`),
        then stop; later pokes are ignored."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(task, 2 * SEND_TIMEOUT_S + self._interval_s)
            except TimeoutError:
                pass  # wait_for cancelled it: the relay's poll finds the row
