"""The alert sink's record survives a lost session: a firing whose statement's session is
ended (pg_terminate_backend while it waits on the row) is recorded on a fresh one, not
dropped with an error line (the count of the open incident stayed one short)."""

from __future__ import annotations

import asyncio

import asyncpg

from payflow.alerts import Severity
from payflow.alerts.sink import CooldownAlertSink
from payflow.alerts.store import AlertStore
from payflow.config import Settings
from tests.integration.alerts.test_alerts_table import Clock, Recorder

WAITING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO alerts%'"
)


async def _terminate_when_waiting(owner: asyncpg.Connection) -> None:
    for _ in range(200):
        pid = await owner.fetchval(WAITING)
        if pid is not None:
            assert await owner.fetchval("SELECT pg_terminate_backend($1)", pid)
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the firing never waited on the locked row")


async def test_a_firing_whose_session_is_terminated_is_recorded_on_a_fresh_one(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    sink = CooldownAlertSink(
        store=AlertStore(pool, settings, database=settings),
        delivery=Recorder(),
        cooldown_s=300.0,
        clock=Clock(),
    )
    await sink.fire("zombies", Severity.WARNING, "3 stuck")
    async with owner_pool.acquire() as locker, owner_pool.acquire() as owner:
        tx = locker.transaction()
        await tx.start()
        await locker.execute("SELECT 1 FROM alerts WHERE key = 'zombies' FOR UPDATE")
        firing = asyncio.create_task(sink.fire("zombies", Severity.WARNING, "4 stuck"))
        await _terminate_when_waiting(owner)
        await asyncio.sleep(0.3)
        await tx.rollback()
        await asyncio.wait_for(firing, 30)
    row = await pool.fetchrow("SELECT count, message FROM alerts WHERE key = 'zombies'")
    assert (row["count"], row["message"]) == (2, "4 stuck")
