"""Prometheus metric families of every role (issue 9), named by Prometheus conventions.

One place defines them so that every module increments the same families; each role
serves them (the API on `/metrics`, the other roles on `METRICS_PORT`, see
`payflow.metrics_server`). The families register on `REGISTRY`, a registry owned by this
module (not prometheus-client's global default), which the serving code exposes.

Counters are incremented where the event happens, after its transaction committed.
The state gauges (events and payments by status, DLQ, outbox lag, zombies, queue depth)
are read from PostgreSQL and RabbitMQ by `StateRefresher` in the background, with a
short timeout per source, so a scrape only reads cached numbers and never waits on a
database or broker. Names and label values are documented in docs/operations.md#metrics.
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
from prometheus_client import CollectorRegistry, Counter, Gauge

from payflow.config import BrokerSettings, Settings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction

REGISTRY = CollectorRegistry(auto_describe=True)
SQL = load_queries("payflow")
log = structlog.get_logger("payflow.metrics")

# Label values that always exist (zero when no row has them), so alerts and dashboards
# see a series from the first scrape on.
EVENT_STATUSES = ("pending", "enqueued", "processing", "confirmed", "failed")
PAYMENT_STATUSES = ("pending", "succeeded", "failed")
# The zombie bounds of the seed (docs/operations.md#zombies), in seconds.
ZOMBIE_PROCESSING_S = 300.0
ZOMBIE_WAITING_S = 900.0
STUCK_CLAIM_S = 600.0

CONSUMER_MESSAGES = Counter(
    "payflow_consumer_messages_total",
    "Messages settled by consumers, by queue and outcome (acked, retried, dead_lettered, terminal)",
    ("queue", "outcome"),
    registry=REGISTRY,
)
POSTINGS = Counter(
    "payflow_postings_total",
    "Ledger postings by outcome (success, insufficient_funds, account_frozen, amount_overflow,"
    " replayed)",
    ("outcome",),
    registry=REGISTRY,
)
PAYOUTS = Counter(
    "payflow_payouts_total",
    "On-chain payout steps by state (signed, sent, bumped, confirmed, failed, waiting)",
    ("state",),
    registry=REGISTRY,
)

WEBHOOK_ATTEMPTS = Counter(
    "payflow_webhook_attempts_total",
    "Merchant webhook POST attempts by result (delivered, failed, refused, duplicate)",
    ("result",),
    registry=REGISTRY,
)
RECON_RUNS = Counter(
    "payflow_recon_runs_total",
    "Reconciliation runs by kind (hot, full)",
    ("kind",),
    registry=REGISTRY,
)
RECON_MISMATCHES = Gauge(
    "payflow_recon_mismatches",
    "Mismatches found by the last run of each kind",
    ("kind",),
    registry=REGISTRY,
)
RECON_LAST_SUCCESS = Gauge(
    "payflow_recon_last_success_timestamp_seconds",
    "Unix time of the last clean reconciliation of each kind",
    ("kind",),
    registry=REGISTRY,
)
JOB_RUNS = Counter(
    "payflow_job_runs_total",
    "Maintenance job runs by job and outcome (ok, alert, skipped, failed)",
    ("job", "outcome"),
    registry=REGISTRY,
)

# --- state gauges, set by StateRefresher (max over live processes in multiprocess mode)
EVENTS = Gauge(
    "payflow_events",
    "Payment events by status (rows of payment_events)",
    ("status",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
PAYMENTS = Gauge(
    "payflow_payments",
    "Merchant payments by status",
    ("status",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
DLQ_UNRESOLVED = Gauge(
    "payflow_dlq_unresolved",
    "Dead-letter rows not resolved yet",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
DLQ_LAST_HOUR = Gauge(
    "payflow_dlq_created_last_hour",
    "Dead-letter rows created in the last hour (resolved or not)",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
OUTBOX_UNPUBLISHED = Gauge(
    "payflow_outbox_unpublished",
    "Outbox rows not yet published to RabbitMQ",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
OUTBOX_OLDEST_AGE = Gauge(
    "payflow_outbox_oldest_unpublished_age_seconds",
    "Age of the oldest unpublished outbox row (0 when none): the relay's lag",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
ZOMBIE_EVENTS = Gauge(
    "payflow_zombie_events",
    "Payment events stuck in a state past its bound, by state (processing > 5 min,"
    " waiting = pending or enqueued > 15 min)",
    ("state",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
STUCK_CLAIMS = Gauge(
    "payflow_stuck_claims",
    "processed_events claims still pending after 10 min (an invariant is broken)",
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
QUEUE_MESSAGES = Gauge(
    "payflow_queue_messages",
    "RabbitMQ messages per work, retry and DLQ queue, by state (ready only: AMQP's"
    " passive declare does not report unacked messages)",
    ("queue", "state"),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)
STATE_REFRESHES = Counter(
    "payflow_state_refreshes_total",
    "Refreshes of the state gauges by source (database, broker) and outcome (ok, failed)",
    ("source", "outcome"),
    registry=REGISTRY,
)
STATE_LAST_REFRESH = Gauge(
    "payflow_state_last_refresh_timestamp_seconds",
    "Unix time of the last successful refresh of the state gauges, by source",
    ("source",),
    registry=REGISTRY,
    multiprocess_mode="livemax",
)


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
        settings: Settings,
        connection: aio_pika.abc.AbstractConnection | None = None,
    ) -> None:
        self._pool = pool
        self._settings = settings
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
            transaction(conn, self._settings, statement_timeout_ms=timeout_ms),
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
        for name in queue_names(self._settings.broker):
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
    settings: Settings,
    connection: aio_pika.abc.AbstractConnection | None = None,
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
    task = asyncio.create_task(StateRefresher(pool, settings, connection).run(stop))
    try:
        yield
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await task
        _active = False
