"""The Redis DLQ drain: moves dead letters parked in Redis while PostgreSQL was
unreachable back into `dead_letter_queue` (the fallback side is
`payflow.dlq.fallback`). The drain knows no domain: it redoes an entry's dead-lettering
through the `DeadLetterer` its source's domain exports, from the table the composition
root passes (`payflow.ops.dlq_drain.DEAD_LETTERERS`, as `REPLAYERS` for replay).

Protocol, per entry, oldest first (at least once, never twice):

1. an entry left in ``<prefix>dlq:fallback:processing`` by a run that died is taken
   first; otherwise the oldest entry is moved there atomically (``LMOVE fallback
   processing RIGHT LEFT``), so a crash never loses it;
2. one PostgreSQL transaction takes an advisory lock on the entry id, checks that no
   DLQ row carries that entry id yet (`fallback_entry_recorded`), and runs the same
   settle-and-record function as the source's `on_dead` hook (the source's
   `DeadLetterer`) with the entry id stored in the row;
3. after the commit the entry is removed from the processing list (``LREM``).

A crash between 2 and 3 leaves the entry in the processing list; the next run finds its
row and only removes it: one DLQ row per entry. A malformed entry (not JSON, another
version, missing or invalid fields, a source without a dead-letterer) or one PostgreSQL
refuses for good (a constraint) and that, asked again afterwards, has no DLQ row yet (a
refusal can follow the commit of that very entry), is moved, unchanged, to
``<prefix>dlq:malformed`` in one MULTI (never dropped, no TTL) and alerts
``dlq.fallback.malformed``. A retryable failure (the database still down, a lost session
of the connection class `errors.is_connection_error`, a lock timeout) leaves the entry
where it is, and so does a refusal whose check cannot run; after
`DLQ_DRAIN_MAX_FAILURES` such failures in a row the run stops and alerts
``dlq.fallback.drain_failed``. At most `DLQ_DRAIN_BATCH` entries are handled per run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import asyncpg
import structlog
from redis.asyncio import Redis

from payflow.alerts import AlertSink, Severity
from payflow.config import DatabaseSettings, DlqSettings, RedisSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.dlq.fallback import (
    FallbackEntry,
    MalformedEntry,
    fallback_key,
    malformed_key,
    processing_key,
)
from payflow.dlq.records import SQL, fallback_entry_recorded
from payflow.errors import PayflowError, RetryableError, classify
from payflow.jobs.spec import JobResult

log = structlog.get_logger("payflow.dlq")

ALERT_MALFORMED = "dlq.fallback.malformed"
ALERT_DRAIN_FAILED = "dlq.fallback.drain_failed"


@dataclass(frozen=True, slots=True)
class DeadLetterer:
    """How the drain redoes one source's dead-lettering, exported by that source's domain.

    `subject_key` is the payload key naming the subject (an entry whose `subject_id` is
    not that value is malformed). `dead_letter(conn, entry, fallback)` runs inside the
    drain's transaction what the source's `on_dead` runs (settle the subject, record the
    DLQ row with `fallback`, the entry's mark) and returns the row's id, or None when the
    subject finished meanwhile (nothing to dead-letter)."""

    subject_key: str
    dead_letter: Callable[[Connection, FallbackEntry, Mapping[str, str]], Awaitable[int | None]]


@dataclass(slots=True)
class DrainStats:
    """What one run did, in entries."""

    moved: int = 0  # became a dead_letter_queue row
    settled: int = 0  # the subject finished meanwhile: nothing to dead-letter
    duplicates: int = 0  # already moved by a run that died before removing it
    set_aside: int = 0  # malformed or refused for good: in <prefix>dlq:malformed
    failures: int = 0  # retryable failures (the entry stays for the next run)
    stopped: bool = False

    @property
    def handled(self) -> int:
        """Entries that left the fallback for good this run."""
        return self.moved + self.settled + self.duplicates + self.set_aside

    def summary(self, left: int) -> str:
        """A one-line human summary."""
        text = (
            f"moved {self.moved}, settled {self.settled}, duplicates {self.duplicates}, "
            f"set aside {self.set_aside}, failures {self.failures}; {left} left"
        )
        return text + (" (stopped after consecutive failures)" if self.stopped else "")


async def _next_raw(redis: Redis, settings: RedisSettings) -> bytes | str | None:
    """The oldest entry of the processing list (a dead run's), else the oldest pending
    entry, moved atomically into the processing list; None when both are empty."""
    leftover: bytes | str | None = await redis.lindex(processing_key(settings), -1)
    if leftover is not None:
        return leftover
    moved: bytes | str | None = await redis.lmove(
        fallback_key(settings), processing_key(settings), "RIGHT", "LEFT"
    )
    return moved


async def _set_aside(redis: Redis, settings: RedisSettings, raw: bytes | str) -> None:
    """Move `raw` unchanged from the processing list to the malformed list, atomically."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.lpush(malformed_key(settings), raw)
        pipe.lrem(processing_key(settings), -1, raw)  # type: ignore[arg-type]  # bytes ok at run time
        await pipe.execute()


def _dead_letterer(
    entry: FallbackEntry, dead_letterers: Mapping[str, DeadLetterer]
) -> DeadLetterer:
    """The source's dead-letterer; `MalformedEntry` for a source without one (as
    `FallbackEntry.from_json` refuses a source the DLQ does not know)."""
    dead_letterer = dead_letterers.get(entry.source)
    if dead_letterer is None:
        raise MalformedEntry("invalid fields: source")
    return dead_letterer


def _checked(entry: FallbackEntry, dead_letterers: Mapping[str, DeadLetterer]) -> FallbackEntry:
    """`MalformedEntry` when the source has no dead-letterer or the subject id is not the
    one its payload names (the drain's duplicate check and the recorded row must agree on
    the subject)."""
    named = entry.payload.get(_dead_letterer(entry, dead_letterers).subject_key)
    if str(named) != entry.subject_id:
        raise MalformedEntry("subject_id does not match the payload")
    return entry


async def move_entry(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    entry: FallbackEntry,
    dead_letterers: Mapping[str, DeadLetterer],
) -> str:
    """Redo the source's dead-lettering for one entry in ONE transaction; returns
    ``moved`` (a DLQ row was written), ``settled`` (the subject finished meanwhile:
    no row, as `on_dead` would have decided) or ``duplicate`` (a row of this entry
    exists). Raises what the transaction raised (nothing is written then), and
    `MalformedEntry` for a source without a dead-letterer in `dead_letterers`."""
    dead_letterer = _dead_letterer(entry, dead_letterers)
    mark = {"entry_id": entry.entry_id, "failed_at": entry.failed_at.isoformat()}
    async with pool.acquire() as conn, transaction(conn, settings):
        await conn.execute(SQL["lock_fallback_entry"], entry.entry_id)
        if await fallback_entry_recorded(conn, entry.source, entry.subject_id, entry.entry_id):
            return "duplicate"
        dlq_id = await dead_letterer.dead_letter(conn, entry, mark)
    return "moved" if dlq_id is not None else "settled"


async def _recorded(
    pool: asyncpg.Pool, settings: DatabaseSettings, entry: FallbackEntry
) -> bool | None:
    """Whether a DLQ row of `entry` exists; None when the database cannot say now."""
    try:
        async with pool.acquire() as conn, transaction(conn, settings, readonly=True):
            found = await fallback_entry_recorded(
                conn, entry.source, entry.subject_id, entry.entry_id
            )
    except Exception as exc:
        log.warning("payflow.dlq.fallback_check_failed", error=str(classify(exc))[:300])
        return None
    return found is not None


async def _drain_one(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    entry: FallbackEntry,
    dead_letterers: Mapping[str, DeadLetterer],
) -> tuple[str, PayflowError | None]:
    """Move one entry: (``moved`` | ``settled`` | ``duplicate``, None) when it may leave
    Redis; (``failed``, error) when it must stay for a later run (retryable, the
    connection class included: a lost session never refuses an entry); (``refused``,
    error) only for a non-retryable failure of an entry that, asked afterwards, has no
    DLQ row (the failure may have followed its commit: then it is a ``duplicate``)."""
    try:
        return await move_entry(pool, settings, entry, dead_letterers), None
    except Exception as exc:
        error = classify(exc)
    if isinstance(error, RetryableError):
        return "failed", error
    recorded = await _recorded(pool, settings, entry)
    if recorded is None:
        return "failed", error
    return ("duplicate", None) if recorded else ("refused", error)


async def drain_fallback(
    pool: asyncpg.Pool,
    redis: Redis,
    alerts: AlertSink,
    settings: DlqSettings,
    dead_letterers: Mapping[str, DeadLetterer],
    *,
    redis_settings: RedisSettings,
    database: DatabaseSettings,
) -> JobResult:
    """Move up to `DLQ_DRAIN_BATCH` Redis fallback entries into `dead_letter_queue`,
    each through its source's dead-letterer in `dead_letterers`.

    Returns outcome ``ok`` (``alert`` when entries were set aside or the run stopped
    after `DLQ_DRAIN_MAX_FAILURES` consecutive retryable failures). Redis errors
    propagate (the run is recorded as failed; every entry is still in Redis). Invariant:
    an entry leaves Redis only after its DLQ row (or its settled subject) is committed,
    or into the malformed list.
    """
    stats = DrainStats()
    consecutive = 0
    while stats.handled < settings.dlq_drain_batch:
        raw = await _next_raw(redis, redis_settings)
        if raw is None:
            break
        try:
            entry = _checked(FallbackEntry.from_json(raw), dead_letterers)
        except MalformedEntry as exc:
            await _set_aside(redis, redis_settings, raw)
            stats.set_aside += 1
            log.error("payflow.dlq.fallback_malformed", reason=str(exc))
            continue
        bound = {"entry_id": entry.entry_id, "source": entry.source, "subject_id": entry.subject_id}
        outcome, error = await _drain_one(pool, database, entry, dead_letterers)
        if outcome == "refused":
            await _set_aside(redis, redis_settings, raw)
            stats.set_aside += 1
            log.error("payflow.dlq.fallback_refused", error=str(error), **bound)
            continue
        if outcome == "failed":
            stats.failures += 1
            consecutive += 1
            log.warning("payflow.dlq.fallback_drain_failed", error=str(error), **bound)
            if consecutive >= settings.dlq_drain_max_failures:
                stats.stopped = True
                break
            continue
        consecutive = 0
        await redis.lrem(processing_key(redis_settings), -1, raw)  # type: ignore[arg-type]  # as above
        if outcome == "moved":
            stats.moved += 1
        elif outcome == "settled":
            stats.settled += 1
        else:
            stats.duplicates += 1
        log.info("payflow.dlq.fallback_drained", outcome=outcome, **bound)
    left = int(await redis.llen(fallback_key(redis_settings))) + int(
        await redis.llen(processing_key(redis_settings))
    )
    summary = stats.summary(left)
    if stats.set_aside:
        await alerts.fire(
            ALERT_MALFORMED,
            Severity.WARNING,
            f"{stats.set_aside} Redis DLQ entries set aside in {malformed_key(redis_settings)}: "
            "inspect them and record each by hand",
            details={"set_aside": stats.set_aside},
        )
    if stats.stopped:
        await alerts.fire(
            ALERT_DRAIN_FAILED,
            Severity.CRITICAL,
            f"Redis DLQ drain stopped after {consecutive} consecutive failures; {left} "
            f"entries wait in Redis (TTL {settings.dlq_fallback_ttl_s} s)",
            details={"left": left, "failures": stats.failures},
        )
    elif stats.failures == 0 and stats.handled:
        await alerts.resolve(ALERT_DRAIN_FAILED)
    log.info("payflow.dlq.fallback_drain_done", summary=summary)
    outcome = "alert" if stats.set_aside or stats.stopped else "ok"
    return JobResult(outcome, summary)
