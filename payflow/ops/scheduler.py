"""The scheduler role: runs the maintenance jobs every tick until stopped.

Every replica may run it; each job takes a transaction-scoped advisory lock, so one
replica does the work per tick and the others skip (no session state, PgBouncer-safe).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import asyncpg
import structlog

from payflow.config import Settings
from payflow.ledger.retention import cleanup_processed_events
from payflow.ops.recovery import recover_stale_events
from payflow.ops.retention import cleanup_idempotency_keys
from payflow.ops.sweeps import sweep_pending_payments, sweep_undelivered_webhooks
from payflow.outbox.maintenance import alert_stale_outbox, cleanup_outbox

log = structlog.get_logger("payflow.scheduler")

Job = Callable[[asyncpg.Pool, Settings], Awaitable[object]]
JOBS: dict[str, Job] = {
    "recover_stale_events": recover_stale_events,
    "sweep_pending_payments": sweep_pending_payments,
    "sweep_undelivered_webhooks": sweep_undelivered_webhooks,
    "alert_stale_outbox": alert_stale_outbox,
    "cleanup_outbox": cleanup_outbox,
    "cleanup_idempotency_keys": cleanup_idempotency_keys,
    "cleanup_processed_events": cleanup_processed_events,
}


async def run_tick(pool: asyncpg.Pool, settings: Settings) -> None:
    """Run every job once; one failing job does not stop the others."""
    for name, job in JOBS.items():
        try:
            await job(pool, settings)
        except Exception as exc:
            log.error(
                "payflow.scheduler.job_failed", job=name, error=f"{type(exc).__name__}: {exc}"
            )


async def run_scheduler(pool: asyncpg.Pool, settings: Settings, stop: asyncio.Event) -> None:
    """Tick every `scheduler_interval_s` until `stop` is set."""
    log.info("payflow.scheduler.started")
    while not stop.is_set():
        await run_tick(pool, settings)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=settings.scheduler_interval_s)
    log.info("payflow.scheduler.stopped")
