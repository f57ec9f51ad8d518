"""Waking the outbox relays for rows a process committed, outside the commits themselves.

A `NOTIFY` inside a transaction makes that transaction's commit wait for every other
notifying commit in the database: PostgreSQL holds one database-wide lock from the
notification's pre-commit through the commit's WAL flush, so notifying commits run one at
a time. pgbench on this host, 32 clients inserting one row each: 7,855 commits/s without a
NOTIFY, 2,027/s with one. The API's payment creation, the busiest writer, therefore
commits without NOTIFY and asks its process's `RelayWaker` instead, which sends
`pg_notify` in a statement of its own: at most one in flight, spaced by at least
`min_gap_s`, each covering every commit made before it was sent.

A wake-up is only a hint: the relays also poll every `RELAY_POLL_INTERVAL_S`, so a lost
one (the process died after its commit, PostgreSQL unreachable) delays a row, never
loses it.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import structlog

from payflow.outbox.writer import NOTIFY_CHANNEL

log = structlog.get_logger("payflow.outbox")


class RelayWaker:
    """Coalesced relay wake-ups of one process.

    `request()` after a commit that wrote outbox rows; it never blocks and never raises.
    Invariant: every request is followed by a `pg_notify` sent after it was made (unless
    the NOTIFY fails, which the relays' poll covers); requests made while one is being
    sent are covered by exactly one more.
    """

    def __init__(self, pool: asyncpg.Pool, *, min_gap_s: float, timeout_s: float) -> None:
        """`min_gap_s`: the least time between two NOTIFYs (seconds; the relay's own
        batching window, `RELAY_LINGER_MS`, is the natural value); `timeout_s` bounds
        each NOTIFY statement."""
        self._pool = pool
        self._min_gap_s = min_gap_s
        self._timeout_s = timeout_s
        self._requested = False
        self._task: asyncio.Task[None] | None = None
        self.sent = 0  # NOTIFYs sent so far (for tests and the curious)

    def request(self) -> None:
        """Ask for a wake-up covering everything this process has committed so far."""
        self._requested = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="payflow-relay-waker")

    async def _run(self) -> None:
        while self._requested:
            self._requested = False  # later requests ask for another NOTIFY after this one
            try:
                async with self._pool.acquire() as conn:
                    await conn.execute(
                        "SELECT pg_notify($1, '')", NOTIFY_CHANNEL, timeout=self._timeout_s
                    )
                self.sent += 1
            except Exception as exc:  # a hint only: the relays' poll finds the rows
                log.info("payflow.outbox.wake_failed", error=f"{type(exc).__name__}: {exc}")
            if self._min_gap_s > 0:
                await asyncio.sleep(self._min_gap_s)

    async def aclose(self) -> None:
        """Send what was requested (bounded by the statement timeout), then stop."""
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, self._timeout_s + self._min_gap_s + 1)
            self._task = None
