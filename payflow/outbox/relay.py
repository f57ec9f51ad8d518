"""The outbox relay: outbox rows -> RabbitMQ, at least once, marked after the confirm.

One pass (`relay_once`) claims a batch with FOR UPDATE SKIP LOCKED, publishes every
row with publisher confirms and `mandatory`, and marks the confirmed ones published,
all while holding the row locks, so concurrent relays never publish the same row at
the same time. A crash between publish and mark rolls the marks back: the rows are
published again (a duplicate message, never a lost one) and consumers dedupe.

For the rows of a hooked topic (`PublishHook`, wired in `payflow.roles`: the ledger's
`ledger.event`) the same transaction moves the subject (the event pending -> enqueued
through its state machine), so recovery can find events that were handed to the
broker but never finished.

A row the broker refuses (returned as unroutable, or nacked) is not retried first on
the next pass: it gets `next_attempt_at = now + min(RELAY_RETRY_BACKOFF_S * 2^n,
RELAY_RETRY_MAX_BACKOFF_S)` and the claim takes only due rows, so such rows never block
the rows behind them; from `RELAY_UNPUBLISHABLE_ALERT_ATTEMPTS` failures on, each one
logs `payflow.outbox.unpublishable`. A failure on the way (connection, channel) is not
the row's fault: the row stays due and the relay as a whole backs off.

Rows of a notification feed topic (`broker.topology.UNROUTED_TOPICS`) are marked
published without a publish: no queue is declared for them and nothing in payflow
consumes them, so the row itself stays the record.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
import aiormq
import asyncpg
import structlog

from payflow.broker.messages import encode_payload
from payflow.broker.publisher import publish
from payflow.broker.topology import UNROUTED_TOPICS
from payflow.config import DatabaseSettings, OutboxSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import classify, is_connection_error
from payflow.outbox.writer import NOTIFY_CHANNEL

SQL = load_queries("payflow.outbox")
log = structlog.get_logger("payflow.outbox")

AfterPublish = Callable[[list[int]], Awaitable[None]]
RECONNECT_BACKOFF_S = 1.0
# The first wait after a pass lost with its session (then doubling to the one above).
LOST_SESSION_BACKOFF_S = 0.02
# Empty passes a busy relay still polls (RELAY_LINGER_MS apart) before it sleeps until
# a wake-up: 4 x 5 ms covers a `RelayWaker` interval (20 ms), so under steady load the
# relay never waits for a coalesced NOTIFY.
BUSY_EMPTY_PASSES = 4


@dataclass(frozen=True, slots=True)
class RelayPass:
    """What one relay pass did: rows claimed, confirmed by the broker, refused by it."""

    claimed: int = 0
    published: int = 0
    deferred: int = 0


def _refused_by_broker(exc: BaseException) -> bool:
    """True when the broker answered about this very message (a `basic.return` of an
    unroutable mandatory publish, or a `basic.nack`), not when the way to it failed."""
    return isinstance(exc, aiormq.exceptions.DeliveryError)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:1000]


async def _publish_row(exchange: aio_pika.abc.AbstractExchange, row: asyncpg.Record) -> int:
    """Publish one row; runs as its own task (gather), so the row's trace id bound here
    is on this row's log lines only."""
    payload: dict[str, Any] = row["payload"]
    structlog.contextvars.bind_contextvars(trace_id=row["trace_id"], outbox_id=int(row["id"]))
    await publish(
        exchange,
        row["topic"],
        encode_payload(payload),
        message_id=str(row["id"]),
        trace_id=row["trace_id"],
        attempt=1,
    )
    log.debug("payflow.outbox.relayed", topic=row["topic"])
    return int(row["id"])


@dataclass(frozen=True, slots=True)
class PublishHook:
    """A domain's status moves for the subjects its topic's rows announce, made inside the
    relay's transaction (wired in the composition root: the ledger's `ON_PUBLISHED`).

    `publishing(conn, subjects)` runs before the batch is handed to the broker (the
    subjects' row locks are then the relay's until commit, and a rollback undoes the
    move); `not_published(conn, subjects)` for those not handed over after all.
    `subject_key` names the payload key holding a row's subject id (text).
    """

    topic: str
    subject_key: str
    publishing: Callable[[Connection, set[str]], Awaitable[None]]
    not_published: Callable[[Connection, set[str]], Awaitable[None]]


def _subject(row: asyncpg.Record, hook: PublishHook | None) -> str | None:
    """The subject a row of the hook's topic announces (None for other topics)."""
    if hook is None or row["topic"] != hook.topic:
        return None
    subject = row["payload"].get(hook.subject_key)
    return subject if isinstance(subject, str) else None


async def relay_once(
    pool: asyncpg.Pool,
    settings: OutboxSettings,
    exchange: aio_pika.abc.AbstractExchange,
    *,
    database: DatabaseSettings,
    after_publish: AfterPublish | None = None,
    batch_size: int | None = None,
    on_published: PublishHook | None = None,
) -> RelayPass:
    """Publish one batch of due unpublished outbox rows; returns the counts.

    Invariant: a row is marked published only after the broker confirmed it, in the
    transaction that held its lock while publishing. A row the broker refused gets a
    back-off (`next_attempt_at`, `last_error`, `publish_attempts + 1`) in the same
    transaction and never delays the rows behind it. `after_publish` (tests) runs
    between the confirms and the marks. `batch_size` rows at most (None:
    `RELAY_BATCH_SIZE`). `settings` is the outbox slice; the claiming transaction keeps
    `database`'s statement bounds. `on_published`: the status moves of one topic's
    subjects (`PublishHook`), in this transaction. Raises (classified) only when nothing
    was confirmed because the way to the broker failed.
    """
    transport_errors: list[BaseException] = []
    refused: list[tuple[int, BaseException]] = []
    alerts: list[asyncpg.Record] = []
    started = time.monotonic()
    async with pool.acquire() as conn, transaction(conn, database) as tx:
        rows = await tx.fetch(SQL["claim_batch"], batch_size or settings.relay_batch_size)
        if not rows:
            return RelayPass()
        # Move the announced subjects (ledger events: to enqueued) BEFORE publishing: the
        # row lock is then ours until commit, so a fast consumer waits a moment instead
        # of the relay queueing behind postings; a rollback leaves them as they were.
        events = {int(row["id"]): _subject(row, on_published) for row in rows}
        announced = {e for e in events.values() if e is not None}
        if on_published is not None and announced:
            await on_published.publishing(tx, announced)
        # A feed topic whose queue is not declared (no consumer anywhere) is settled
        # without a publish: nothing would read it, and a mandatory publish would be
        # returned and retried for ever.
        settled = [int(row["id"]) for row in rows if row["topic"] in UNROUTED_TOPICS]
        sent = [row for row in rows if row["topic"] not in UNROUTED_TOPICS]
        results = await asyncio.gather(
            *(_publish_row(exchange, row) for row in sent), return_exceptions=True
        )
        confirmed: list[int] = list(settled)
        failed: list[int] = []
        for row, result in zip(sent, results, strict=True):
            if isinstance(result, BaseException):
                failed.append(int(row["id"]))
                if _refused_by_broker(result):
                    refused.append((int(row["id"]), result))
                else:
                    transport_errors.append(result)
            else:
                confirmed.append(result)
        if after_publish is not None:
            await after_publish(confirmed)
        if confirmed:
            await tx.execute(SQL["mark_published"], confirmed)
        if refused:
            deferred = await tx.fetch(
                SQL["defer_refused_publish"],
                [outbox_id for outbox_id, _ in refused],
                [_error_text(exc) for _, exc in refused],
                settings.relay_retry_backoff_s,
                settings.relay_retry_max_backoff_s,
            )
            limit = settings.relay_unpublishable_alert_attempts
            alerts = [r for r in deferred if r["publish_attempts"] >= limit]
        if transport_errors:
            refused_ids = {outbox_id for outbox_id, _ in refused}
            on_the_way = [i for i in failed if i not in refused_ids]
            await tx.execute(
                SQL["count_failed_publish"], on_the_way, _error_text(transport_errors[0])
            )
        if failed:
            # Not handed over after all (unless another row of the batch announced it).
            handed = {events[i] for i in confirmed}
            unsent = {e for i in failed if (e := events[i]) is not None and e not in handed}
            if on_published is not None and unsent:
                await on_published.not_published(tx, unsent)
    errors = [exc for _, exc in refused] + transport_errors
    if errors:
        log.warning(
            "payflow.outbox.publish_failed",
            failed=len(errors),
            refused=len(refused),
            error=_error_text(errors[0]),
        )
    refused_errors = dict(refused)
    for alert in alerts:
        log.error(
            "payflow.outbox.unpublishable",
            outbox_id=alert["id"],
            trace_id=alert["trace_id"],
            topic=alert["topic"],
            attempts=alert["publish_attempts"],
            next_attempt_at=alert["next_attempt_at"].isoformat(),
            error=_error_text(refused_errors[alert["id"]]),
        )
    if transport_errors and not confirmed:
        raise classify(transport_errors[0])
    log.debug(
        "payflow.outbox.published",
        count=len(confirmed),
        batch_ms=round((time.monotonic() - started) * 1000, 1),
    )
    return RelayPass(claimed=len(rows), published=len(confirmed), deferred=len(refused))


async def run_relay(
    pool: asyncpg.Pool,
    settings: OutboxSettings,
    exchange: aio_pika.abc.AbstractExchange,
    stop: asyncio.Event,
    *,
    database: DatabaseSettings,
    listen_pool: asyncpg.Pool | None = None,
    on_published: PublishHook | None = None,
    reopen: Callable[[], Awaitable[aio_pika.abc.AbstractExchange]] | None = None,
) -> None:
    """Relay until `stop` is set. After a pass that found rows the next claim follows
    `RELAY_LINGER_MS` later, without waiting for a wake-up (busy: the relay polls on its
    own, and producers' coalesced wake-ups cost nothing); after `BUSY_EMPTY_PASSES` empty
    passes in a row it sleeps until a NOTIFY, or `RELAY_POLL_INTERVAL_S` as the fallback.

    Invariant: unpublished rows are eventually published as long as the broker and
    the database come back; failures are logged and retried, never dropped. The LISTEN
    connection comes from `listen_pool` (default `pool`), which must reset sessions and
    reach PostgreSQL itself (`DatabaseSettings.direct_url()`, DATABASE_DIRECT_URL): through
    PgBouncer in transaction pooling a LISTEN hears nothing, and only the poll every
    `RELAY_POLL_INTERVAL_S` finds new rows (slower, never lost).

    `reopen` gives a fresh channel's exchange: called after a pass whose every publish the
    broker refused. A channel restored onto another cluster node while a quorum queue's
    leader was still the lost node keeps being nacked by RabbitMQ 3.10 after the new
    leader is elected; a fresh channel is confirmed (docs/deployment.md).
    """
    listener = _Listener(listen_pool or pool)
    log.info("payflow.outbox.relay_started")
    quiet = BUSY_EMPTY_PASSES + 1  # empty passes since one found rows: idle at start
    batch = _BatchSize(settings.relay_batch_size)
    try:
        while not stop.is_set():
            listener.wake.clear()
            try:
                await listener.ensure()
                done = await relay_once(
                    pool,
                    settings,
                    exchange,
                    database=database,
                    batch_size=batch.size,
                    on_published=on_published,
                )
            except Exception as exc:
                log.warning(
                    "payflow.outbox.relay_error",
                    error=f"{type(exc).__name__}: {exc}",
                    batch_size=batch.size,
                )
                await _sleep_or_stop(stop, batch.failed(exc))
                continue
            batch.succeeded()
            if reopen is not None and done.deferred and not done.published:
                exchange = await _reopened(reopen, exchange)
            quiet = 0 if done.claimed else quiet + 1
            if done.claimed >= batch.size:
                continue  # a full batch: more may be due
            if quiet > BUSY_EMPTY_PASSES:
                # Idle: sleep until a NOTIFY (in a commit, or a `RelayWaker`'s) or the poll.
                await _wait_for_work(listener.wake, stop, settings.relay_poll_interval_s)
            elif settings.relay_linger_ms:
                # Busy: poll again without waiting for a wake-up, after letting the rows
                # committing right now join the next batch.
                await _sleep_or_stop(stop, settings.relay_linger_ms / 1000)
    finally:
        await listener.close()
        log.info("payflow.outbox.relay_stopped")


async def _reopened(
    reopen: Callable[[], Awaitable[aio_pika.abc.AbstractExchange]],
    exchange: aio_pika.abc.AbstractExchange,
) -> aio_pika.abc.AbstractExchange:
    """A fresh channel's exchange, or `exchange` again when none can be had now."""
    try:
        fresh = await reopen()
    except Exception as exc:  # the way to the broker is failing: the next pass says so
        log.warning("payflow.outbox.channel_reopen_failed", error=f"{type(exc).__name__}: {exc}")
        return exchange
    log.warning("payflow.outbox.channel_reopened")
    return fresh


class _BatchSize:
    """The relay's batch size and back-off after a failed pass.

    A pass holds its transaction open while the broker confirms the batch; when
    sessions are being ended (a failover, a PgBouncer restart, `pg_terminate_backend`),
    a pass longer than the gap between two ends never commits, and retrying the same
    batch would starve every row. So a pass lost with its session (the connection class,
    `errors.is_connection_error`) halves the batch, down to one row, and is retried
    after `LOST_SESSION_BACKOFF_S` doubling per failure up to `RECONNECT_BACKOFF_S`
    (a database that is down is not hammered); every committed pass doubles the batch
    back up to `RELAY_BATCH_SIZE`. Any other failure (the broker's) waits
    `RECONNECT_BACKOFF_S` and keeps the size.
    """

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.size = ceiling
        self._lost = 0  # passes lost with their session in a row

    def failed(self, exc: BaseException) -> float:
        """Record a failed pass; returns the seconds to wait before the next one."""
        if not is_connection_error(exc):
            self._lost = 0
            return RECONNECT_BACKOFF_S
        self.size = max(1, self.size // 2)
        self._lost += 1
        return min(RECONNECT_BACKOFF_S, LOST_SESSION_BACKOFF_S * 2.0 ** (self._lost - 1))

    def succeeded(self) -> None:
        """Record a committed pass."""
        self._lost = 0
        self.size = min(self.ceiling, self.size * 2)


class _Listener:
    """A dedicated pooled connection that LISTENs and sets `wake` on every NOTIFY, and
    when its session ends (then `ensure` listens again on a fresh one).

    LISTEN is session state: the pool must hand out a real PostgreSQL session
    (DATABASE_DIRECT_URL), never a transaction-pooled PgBouncer connection. A session
    ended under it (pg_terminate_backend, a failover) is handed back to the pool by
    asyncpg itself, and the held proxy then raises on any call, `is_closed` too: the end
    is noted by a termination listener, and the proxy dropped, never used again.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._conn: Any = None
        self._lost = False
        self.wake = asyncio.Event()

    def _on_notify(self, *_args: object) -> None:
        self.wake.set()

    def _on_terminated(self, *_args: object) -> None:
        self._lost = True
        self.wake.set()  # the relay's next pass listens again

    def _usable(self) -> bool:
        if self._conn is None or self._lost:
            return False
        try:
            return not self._conn.is_closed()
        except asyncpg.InterfaceError:  # released back to the pool under us
            self._lost = True
            return False

    async def ensure(self) -> None:
        """LISTEN on a live session: the one held, or a fresh one if it was lost."""
        if self._usable():
            return
        await self.close()
        self._conn = await self._pool.acquire()
        self._conn.add_termination_listener(self._on_terminated)
        await self._conn.add_listener(NOTIFY_CHANNEL, self._on_notify)
        self.wake.set()  # anything committed before we listened is picked up at once

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        lost, self._lost = self._lost, False
        if conn is None or lost:
            return  # a lost session's proxy went back to the pool with it
        try:
            conn.remove_termination_listener(self._on_terminated)
            if not conn.is_closed():
                await conn.remove_listener(NOTIFY_CHANNEL, self._on_notify)
        except Exception as exc:
            log.warning("payflow.outbox.unlisten_failed", error=str(exc))
        try:
            await self._pool.release(conn)
        except Exception as exc:
            log.warning("payflow.outbox.release_failed", error=str(exc))


async def _wait_for_work(wake: asyncio.Event, stop: asyncio.Event, seconds: float) -> None:
    waiters = {asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())}
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
