"""The state gauges' snapshot is taken once per half refresh period for the deployment
(migration 0023), on the real database: a second process's refresh within that time
serves the stored snapshot, a refresh that loses the advisory lock too, and the next one
after the period takes a new snapshot that counts what changed."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from payflow.api.auth import create_merchant
from payflow.config import Settings
from payflow.gauges import StateRefresher
from payflow.metrics import REGISTRY
from payflow_lab.bench.submit import DirectSubmitter

PERIOD_S = 60.0  # METRICS_REFRESH_S: a snapshot younger than 30 s is served as it is


def _pending() -> float | None:
    return REGISTRY.get_sample_value("payflow_payments", {"status": "pending"})


async def _snapshot_time(pool: asyncpg.Pool) -> object:
    return await pool.fetchval("SELECT computed_at FROM state_gauges WHERE id = 1")


async def test_one_snapshot_per_period_is_shared_by_every_process(
    pool: asyncpg.Pool, owner_pool: asyncpg.Pool, settings: Settings
) -> None:
    settings = settings.model_copy(update={"metrics_refresh_s": PERIOD_S})
    submitter = DirectSubmitter(pool, settings)
    async with pool.acquire() as conn:
        merchant, _, _ = await create_merchant(conn, "shop", admin=False)

    async def pending_payment() -> None:
        await submitter.submit_payment(merchant, "5.00", "USD", uuid.uuid4().hex, None)

    await pending_payment()
    first = StateRefresher(pool, settings, database=settings, broker=settings)
    await first.refresh()
    assert _pending() == 1
    taken = await _snapshot_time(pool)
    assert taken is not None

    await pending_payment()
    second = StateRefresher(
        pool, settings, database=settings, broker=settings
    )  # another process, within the period
    await second.refresh()
    assert _pending() == 1  # the stored snapshot, not a second count
    assert await _snapshot_time(pool) == taken

    # The snapshot is old now, but another process holds the lock (it is counting).
    await owner_pool.execute(
        "UPDATE state_gauges SET computed_at = computed_at - interval '31 seconds'"
    )
    aged = await _snapshot_time(pool)
    holder = await owner_pool.acquire()
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('payflow.metrics.state', 0))"
        )
        await second.refresh()
        assert _pending() == 1
        assert await _snapshot_time(pool) == aged
        await tx.rollback()
    finally:
        await owner_pool.release(holder)

    await second.refresh()  # old and free: this one counts
    assert _pending() == 2
    assert await _snapshot_time(pool) != aged


async def test_two_refreshing_at_once_take_one_snapshot(
    pool: asyncpg.Pool, settings: Settings
) -> None:
    """Many refreshers at the same moment on an empty store: one counts and stores, the
    rest find no snapshot yet or the new one; there is one row and the gauges are set."""
    settings = settings.model_copy(update={"metrics_refresh_s": PERIOD_S})
    refreshers = [
        StateRefresher(pool, settings, database=settings, broker=settings) for _ in range(8)
    ]
    await asyncio.gather(*(r.refresh() for r in refreshers))
    assert await pool.fetchval("SELECT count(*) FROM state_gauges") == 1
    await refreshers[0].refresh()
    assert _pending() == 0
