"""The state gauges' background refresher: events and payments by status, DLQ, outbox
lag, zombies, stuck claims and queue depth, read from PostgreSQL (one snapshot per half
period for the whole deployment, stored in `state_gauges`) and RabbitMQ, each under its
own timeout, so a scrape only reads cached numbers. It reads every domain's tables, so
it sits above the domains; the families it sets live in `payflow.metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import aio_pika
import aiormq
import asyncpg
import structlog

from payflow.config import BrokerSettings, DatabaseSettings, ObservabilitySettings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.metrics import (
    DLQ_LAST_HOUR,
    DLQ_UNRESOLVED,
    EVENT_STATUSES,
    EVENTS,
    OUTBOX_OLDEST_AGE,
    OUTBOX_UNPUBLISHED,
    PAYMENT_STATUSES,
    PAYMENTS,
    QUEUE_MESSAGES,
    STATE_LAST_REFRESH,
    STATE_REFRESHES,
    STUCK_CLAIM_S,
    STUCK_CLAIMS,
    ZOMBIE_EVENTS,
    ZOMBIE_PROCESSING_S,
    ZOMBIE_WAITING_S,
)

SQL = load_queries("payflow.gauges")
log = structlog.get_logger("payflow.metrics")


def queue_names(settings: BrokerSettings) -> list[str]:
    """Every queue payflow declares: per work queue, itself, its retry tiers and its DLQ."""
    from payflow.broker.topology import WORK_QUEUES, Names

    names = Names(settings.broker_prefix)
    queues: list[str] = []
    for wq in WORK_QUEUES:
        queues.append(names.queue(wq.name))
        queues.extend(names.retry_queue(wq.name, tier) for tier in settings.retry_tiers_ms)
        queues.append(names.parking_queue(wq.name))
    return queues


def _json_object(raw: object) -> dict[str, Any]:
    """A JSON object from the database (decoded already, or as text); anything else: {}."""
    decoded = json.loads(raw) if isinstance(raw, str) else raw
    return dict(decoded) if isinstance(decoded, dict) else {}


def _counts(raw: object, statuses: tuple[str, ...]) -> dict[str, int]:
    """{status: rows} from the query's JSON object, every known status present (0)."""
    found = _json_object(raw)
    return {status: int(found.get(status, 0)) for status in {*statuses, *found}}


class StateRefresher:
    """Sets the state gauges from PostgreSQL and RabbitMQ every `METRICS_REFRESH_S`.

    Each source is read under its own timeout (`METRICS_REFRESH_TIMEOUT_S`); a failed
    source keeps its last values and counts `payflow_state_refreshes_total{outcome=
    "failed"}`, so stale numbers are visible (`payflow_state_last_refresh_timestamp_seconds`).
    Without a broker connection the queue gauges are not refreshed.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: ObservabilitySettings,
        connection: aio_pika.abc.AbstractConnection | None = None,
        *,
        database: DatabaseSettings,
        broker: BrokerSettings,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._database = database
        self._broker = broker
        self._connection = connection
        self._channel: aio_pika.abc.AbstractChannel | None = None

    async def refresh(self) -> None:
        """Refresh both sources once; never raises (failures are counted and logged)."""
        await self._guarded("database", self._refresh_database())
        if self._connection is not None:
            await self._guarded("broker", self._refresh_queues())

    async def _guarded(self, source: str, work: Coroutine[Any, Any, float | None]) -> None:
        """Run one source's refresh; it answers when its data was taken (None: now)."""
        try:
            taken = await asyncio.wait_for(work, self._settings.metrics_refresh_timeout_s)
        except Exception as exc:
            STATE_REFRESHES.labels(source, "failed").inc()
            log.warning(
                "payflow.metrics.refresh_failed",
                source=source,
                error=f"{type(exc).__name__}: {exc}",
            )
            return
        STATE_REFRESHES.labels(source, "ok").inc()
        STATE_LAST_REFRESH.labels(source).set(time.time() if taken is None else taken)

    async def _refresh_database(self) -> float:
        """One snapshot for the whole deployment per half period (`metrics_state`): a
        younger stored one is served as it is, else the process that wins the lock takes
        a new one. Before any snapshot exists the gauges keep their values."""
        timeout_ms = max(1, int(self._settings.metrics_refresh_timeout_s * 1000))
        async with (
            self._pool.acquire() as conn,
            transaction(conn, self._database, statement_timeout_ms=timeout_ms),
        ):
            answer = await conn.fetchrow(
                SQL["metrics_state"],
                ZOMBIE_PROCESSING_S,
                ZOMBIE_WAITING_S,
                STUCK_CLAIM_S,
                self._settings.metrics_refresh_s / 2,
            )
        if answer is None or answer["state"] is None:
            raise LookupError("no state snapshot yet (another process is taking the first)")
        row = _json_object(answer["state"])
        for status, count in _counts(row.get("events"), EVENT_STATUSES).items():
            EVENTS.labels(status).set(count)
        for status, count in _counts(row.get("payments"), PAYMENT_STATUSES).items():
            PAYMENTS.labels(status).set(count)
        # `.get`: a snapshot stored by another code version may lack a newer key.
        DLQ_UNRESOLVED.set(row.get("dlq_unresolved", 0))
        DLQ_LAST_HOUR.set(row.get("dlq_last_hour", 0))
        OUTBOX_UNPUBLISHED.set(row.get("outbox_unpublished", 0))
        OUTBOX_OLDEST_AGE.set(row.get("outbox_oldest_age_s", 0))
        ZOMBIE_EVENTS.labels("processing").set(row.get("zombies_processing", 0))
        ZOMBIE_EVENTS.labels("waiting").set(row.get("zombies_waiting", 0))
        STUCK_CLAIMS.set(row.get("stuck_claims", 0))
        # The data's age, not this call's: a snapshot served while others fail to retake
        # it keeps this gauge falling behind, so `PayflowMetricsStale` still fires.
        return float(answer["computed_at"].timestamp())

    async def _refresh_queues(self) -> None:
        """Passive declares: `message_count` is the queue's ready messages, fresh on each
        declare. A missing queue closes the channel (404); it is skipped, the channel
        reopened."""
        assert self._connection is not None
        for name in queue_names(self._broker):
            if self._channel is None or self._channel.is_closed:
                self._channel = await self._connection.channel()
            try:
                # On the raw channel: aio_pika's robust channel caches declared queues and
                # would return the first declare's stale count.
                underlay = await self._channel.get_underlay_channel()
                declared = await underlay.queue_declare(name, passive=True)
            except (aio_pika.exceptions.ChannelClosed, aiormq.exceptions.ChannelNotFoundEntity):
                self._channel = None
                continue
            ready = declared.message_count or 0
            QUEUE_MESSAGES.labels(name, "ready").set(ready)

    async def close(self) -> None:
        """Close the refresher's own channel."""
        if self._channel is not None and not self._channel.is_closed:
            with contextlib.suppress(Exception):
                await self._channel.close()
        self._channel = None

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every `METRICS_REFRESH_S` until `stop` is set."""
        try:
            while not stop.is_set():
                await self.refresh()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._settings.metrics_refresh_s)
        finally:
            await self.close()


_active = False  # one refresher per process: `payflow up` starts it once for all roles


@contextlib.asynccontextmanager
async def refreshing_state(
    pool: asyncpg.Pool,
    settings: ObservabilitySettings,
    connection: aio_pika.abc.AbstractConnection | None = None,
    *,
    database: DatabaseSettings,
    broker: BrokerSettings,
) -> AsyncIterator[None]:
    """Run a `StateRefresher` in the background for the duration of the block.

    Invariant: at most one refresher per process; a nested call (the API inside
    `payflow up`) reuses the running one. `METRICS_REFRESH_S=0` disables refreshing.
    """
    global _active
    if _active or settings.metrics_refresh_s <= 0:
        yield
        return
    _active = True
    stop = asyncio.Event()
    task = asyncio.create_task(
        StateRefresher(pool, settings, connection, database=database, broker=broker).run(stop)
    )
    try:
        yield
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await task
        _active = False
