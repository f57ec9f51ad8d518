"""The Redis fallback of the dead-letter queue: where a dead letter goes while PostgreSQL
is unreachable.

An `on_dead` hook normally settles its subject and inserts the `dead_letter_queue` row in
one PostgreSQL transaction. When that transaction fails because PostgreSQL cannot be
reached (a connection-class failure, see `is_database_unavailable`), the hook's
`DlqFallback.record` pushes one `FallbackEntry` to the Redis list
``<REDIS_KEY_PREFIX>dlq:fallback`` (LPUSH and EXPIRE in one MULTI, TTL
`DLQ_FALLBACK_TTL_S`) and returns, so the consumer parks and acks the message. When
Redis fails too, the ORIGINAL database error is raised: the message stays unacked in the
broker and comes back (never lost). Any other failure (a constraint, a lock timeout) is
raised unchanged, as before: Redis is only for an unreachable database.

Nothing of the hook's transaction happened, so the entry carries what the drain needs to
redo it (source, subject id, the message payload, error, attempt, trace id, failure
time): `payflow.ops.dlq_drain.drain_redis_dlq` runs the same settle-and-record
functions as the hooks once PostgreSQL is back.

Entry document (JSON, ``version`` 1)::

    {"version": 1, "entry_id": "<uuid4 hex>", "source": "payment_event|payment|webhook",
     "subject_id": "...", "payload": {...}, "error": "...", "attempt": 1,
     "trace_id": "..." | null, "failed_at": "<ISO 8601 UTC>"}
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import structlog
from redis.asyncio import Redis

from payflow.broker.messages import Envelope
from payflow.config import DlqSettings, RedisSettings
from payflow.dlq.records import SOURCES
from payflow.errors import BadInput, is_connection_error

log = structlog.get_logger("payflow.dlq")

ENTRY_VERSION = 1
ENTRY_FIELDS: tuple[str, ...] = (
    "version",
    "entry_id",
    "source",
    "subject_id",
    "payload",
    "error",
    "attempt",
    "trace_id",
    "failed_at",
)


class MalformedEntry(BadInput):
    """A Redis fallback entry that is not a valid version-1 document."""


def fallback_key(settings: RedisSettings) -> str:
    """The list the hooks push to (newest at the head): ``<prefix>dlq:fallback``."""
    return f"{settings.redis_key_prefix}dlq:fallback"


def processing_key(settings: RedisSettings) -> str:
    """The list an entry sits in while the drain moves it: ``<prefix>dlq:fallback:processing``."""
    return f"{settings.redis_key_prefix}dlq:fallback:processing"


def malformed_key(settings: RedisSettings) -> str:
    """Where unusable entries are set aside, never dropped: ``<prefix>dlq:malformed``."""
    return f"{settings.redis_key_prefix}dlq:malformed"


def is_database_unavailable(exc: BaseException) -> bool:
    """True when `exc` means PostgreSQL could not be reached, or the session was lost
    (or refused new work as a whole): `errors.is_connection_error`, the retryable
    connection class, not contention.

    A lost, terminated or refused connection, a protocol state the driver cannot leave
    (asyncpg `InternalClientError`), a connect timeout, SQLSTATE classes 08 and 53 and
    57P01-57P03 qualify; a constraint violation, a lock or statement timeout, a deadlock
    or any non-retryable error does not.
    """
    return is_connection_error(exc)


@dataclass(frozen=True, slots=True)
class FallbackEntry:
    """One dead letter parked in Redis; `entry_id` makes its drain idempotent."""

    entry_id: str
    source: str
    subject_id: str
    payload: dict[str, Any]
    error: str
    attempt: int
    trace_id: str | None
    failed_at: datetime

    @classmethod
    def new(
        cls,
        *,
        source: str,
        subject_id: str,
        payload: Mapping[str, Any],
        error: str,
        attempt: int,
        trace_id: str | None,
    ) -> FallbackEntry:
        """A fresh entry (random id, `failed_at` now in UTC); `BadInput` for an unknown source."""
        if source not in SOURCES:
            raise BadInput(f"unknown DLQ source {source!r}")
        return cls(
            entry_id=uuid.uuid4().hex,
            source=source,
            subject_id=subject_id,
            payload=dict(payload),
            error=error[:2000],
            attempt=max(attempt, 1),
            trace_id=trace_id or None,
            failed_at=datetime.now(UTC),
        )

    def to_json(self) -> bytes:
        """The version-1 document (see the module docstring)."""
        return orjson.dumps(
            {
                "version": ENTRY_VERSION,
                "entry_id": self.entry_id,
                "source": self.source,
                "subject_id": self.subject_id,
                "payload": self.payload,
                "error": self.error,
                "attempt": self.attempt,
                "trace_id": self.trace_id,
                "failed_at": self.failed_at.isoformat(),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> FallbackEntry:
        """Parse and validate one entry; `MalformedEntry` names what is wrong."""
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise MalformedEntry(f"not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise MalformedEntry("not a JSON object")
        if doc.get("version") != ENTRY_VERSION:
            raise MalformedEntry(f"unsupported version {doc.get('version')!r}")
        missing = [name for name in ENTRY_FIELDS if name not in doc]
        if missing:
            raise MalformedEntry(f"missing fields: {', '.join(missing)}")
        checks = (
            ("entry_id", isinstance(doc["entry_id"], str) and bool(doc["entry_id"])),
            ("source", doc["source"] in SOURCES),
            ("subject_id", isinstance(doc["subject_id"], str)),
            ("payload", isinstance(doc["payload"], dict)),
            ("error", isinstance(doc["error"], str)),
            ("attempt", type(doc["attempt"]) is int and doc["attempt"] >= 1),
            ("trace_id", doc["trace_id"] is None or isinstance(doc["trace_id"], str)),
            ("failed_at", isinstance(doc["failed_at"], str)),
        )
        bad = [name for name, ok in checks if not ok]
        if bad:
            raise MalformedEntry(f"invalid fields: {', '.join(bad)}")
        try:
            failed_at = datetime.fromisoformat(doc["failed_at"])
        except ValueError:
            raise MalformedEntry("invalid fields: failed_at") from None
        return cls(
            entry_id=doc["entry_id"],
            source=doc["source"],
            subject_id=doc["subject_id"],
            payload=doc["payload"],
            error=doc["error"],
            attempt=doc["attempt"],
            trace_id=doc["trace_id"],
            failed_at=failed_at if failed_at.tzinfo else failed_at.replace(tzinfo=UTC),
        )


async def push_entry(
    redis: Redis, settings: DlqSettings, entry: FallbackEntry, *, redis_settings: RedisSettings
) -> None:
    """LPUSH the entry and EXPIRE the list in one MULTI/EXEC (both or neither).

    The TTL (`DLQ_FALLBACK_TTL_S`) is the list's and is refreshed by every push, so an
    entry lives at least that long after the newest push. Raises the Redis error.
    """
    key = fallback_key(redis_settings)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.lpush(key, entry.to_json())
        pipe.expire(key, settings.dlq_fallback_ttl_s)
        await pipe.execute()


class DlqFallback:
    """What an `on_dead` hook records through: PostgreSQL first, Redis when it is down.

    `redis=None` disables the fallback (`disabled()`): `record` raises what `write`
    raised, and the consumer does not ack.
    """

    def __init__(
        self, redis: Redis | None, settings: DlqSettings, *, redis_settings: RedisSettings
    ) -> None:
        self._redis = redis
        self._settings = settings
        self._redis_settings = redis_settings

    @classmethod
    def disabled(cls) -> DlqFallback:
        """No fallback: every dead letter is written to PostgreSQL or raised (its settings,
        the slices' defaults, are never read without Redis)."""
        return cls(None, DlqSettings(), redis_settings=RedisSettings())

    async def record_for(
        self,
        write: Callable[[], Awaitable[None]],
        envelope: Envelope,
        *,
        source: str,
        subject_key: str,
        error: str,
    ) -> None:
        """`record` for a dead message: the subject id is `envelope.payload[subject_key]`,
        attempt and trace id are the envelope's. Raises what `record` raises."""
        payload = dict(envelope.payload)
        await self.record(
            write,
            source=source,
            subject_id=str(payload.get(subject_key)),
            payload=payload,
            error=error,
            attempt=envelope.attempt,
            trace_id=envelope.trace_id,
        )

    async def record(
        self,
        write: Callable[[], Awaitable[None]],
        *,
        source: str,
        subject_id: str,
        payload: Mapping[str, Any],
        error: str,
        attempt: int,
        trace_id: str | None,
    ) -> None:
        """Run `write` (the hook's settle-and-record transaction); if PostgreSQL is
        unreachable, park the dead letter in Redis instead.

        Raises: whatever `write` raised when it is not a connection-class failure, or
        when the Redis push fails too (then the original database error, chained to the
        Redis one): the consumer does not ack and the broker redelivers the message.
        """
        try:
            await write()
        except Exception as exc:
            if self._redis is None or not is_database_unavailable(exc):
                raise
            entry = FallbackEntry.new(
                source=source,
                subject_id=subject_id,
                payload=payload,
                error=error,
                attempt=attempt,
                trace_id=trace_id,
            )
            try:
                await push_entry(
                    self._redis, self._settings, entry, redis_settings=self._redis_settings
                )
            except Exception as redis_exc:
                log.error(
                    "payflow.dlq.fallback_failed",
                    source=source,
                    subject_id=subject_id,
                    db_error=f"{type(exc).__name__}: {exc}",
                    redis_error=f"{type(redis_exc).__name__}: {redis_exc}",
                )
                raise exc from redis_exc
            log.error(
                "payflow.dlq.fallback_stored",
                source=source,
                subject_id=subject_id,
                entry_id=entry.entry_id,
                db_error=f"{type(exc).__name__}: {exc}",
            )
