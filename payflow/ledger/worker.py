"""The ledger worker: `ledger.event` messages -> `post_event`, exactly once.

An insufficient-funds outcome writes ONE notification outbox row from inside the
posting transaction (the `on_refusal` hook runs only for a fresh refusal), so N
deliveries of one event never notify N times.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg
import structlog

from payflow.broker.messages import Envelope
from payflow.broker.topology import TOPIC_NOTIFICATION
from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.dlq.drain import DeadLetterer
from payflow.dlq.fallback import DlqFallback, FallbackEntry
from payflow.dlq.records import record_dead_letter
from payflow.errors import AlreadyProcessed, BadInput, PayflowError
from payflow.ledger.posting import post_event
from payflow.ledger.records import Outcome, PostingResult
from payflow.ledger.states import SQL, EventStatus, TransitionKind, transition
from payflow.ledger.together import PostingCoalescer
from payflow.money import format_amount
from payflow.outbox.writer import enqueue

log = structlog.get_logger("payflow.ledger")


def event_id_of(envelope: Envelope) -> str:
    """The event id a message is about; `BadInput` when missing."""
    event_id = envelope.payload.get("event_id")
    if not isinstance(event_id, str) or not event_id:
        raise BadInput("message has no event_id")
    return event_id


async def notify_refusal(conn: Connection, result: PostingResult) -> None:
    """`on_refusal` hook: one notification row for a fresh insufficient-funds outcome."""
    if result.outcome is not Outcome.INSUFFICIENT_FUNDS:
        return
    event = await conn.fetchrow(SQL["get_event"], result.event_id)
    assert event is not None
    await enqueue(
        conn,
        TOPIC_NOTIFICATION,
        {
            "version": 1,
            "event_id": result.event_id,
            "account_id": str(event["account_id"]),
            "amount": format_amount(event["amount"]),
            "reason": result.outcome.value,
        },
        event["trace_id"],
    )


async def dead_letter_event(
    conn: Connection,
    payload: dict[str, Any],
    error: str,
    attempt: int,
    *,
    fallback: Mapping[str, str] | None = None,
) -> int | None:
    """Inside the caller's transaction: fail the event (if not final) and record the DLQ
    row; returns its id, or None when the event finished after all (nothing to
    dead-letter). Shared by `on_dead` and the Redis DLQ drain (`fallback` set)."""
    event_id = str(payload.get("event_id"))
    if isinstance(payload.get("event_id"), str):
        try:
            moved = await transition(conn, event_id, EventStatus.FAILED)
        except PayflowError:
            moved = None
        if moved is not None and moved.kind is TransitionKind.ALREADY_TERMINAL:
            return None
    return await record_dead_letter(
        conn,
        source="payment_event",
        subject_id=event_id,
        payload=payload,
        error=error,
        attempt=attempt,
        fallback=fallback,
    )


async def _redo_dead_event(
    conn: Connection, entry: FallbackEntry, fallback: Mapping[str, str]
) -> int | None:
    """The Redis DLQ drain's redo of an event's `on_dead` (`dead_letter_event`)."""
    return await dead_letter_event(
        conn, entry.payload, entry.error, entry.attempt, fallback=fallback
    )


# What the Redis DLQ drain (`payflow.dlq.drain`) runs for a `payment_event` entry.
EVENT_DEAD_LETTERER = DeadLetterer("event_id", _redo_dead_event)


class LedgerWorker:
    """Handles `ledger.event` messages."""

    def __init__(
        self, pool: asyncpg.Pool, settings: DatabaseSettings, fallback: DlqFallback | None = None
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._fallback = fallback if fallback is not None else DlqFallback.disabled()
        # Concurrent deliveries' success paths share a statement and a commit.
        self._together = PostingCoalescer(pool, settings)

    async def handle(self, envelope: Envelope) -> None:
        """Post the event; a replayed or already-final event is a quiet no-op."""
        event_id = event_id_of(envelope)
        structlog.contextvars.bind_contextvars(event_id=event_id)
        try:
            result = await post_event(
                self._pool,
                self._settings,
                event_id,
                on_refusal=notify_refusal,
                together=self._together,
            )
        except AlreadyProcessed as exc:
            log.info("payflow.ledger.already_final", reason=str(exc))
            return
        log.info("payflow.ledger.posted", outcome=result.outcome.value, replayed=result.replayed)

    async def on_dead(self, envelope: Envelope, error: PayflowError) -> None:
        """Retries exhausted: fail the event (if not final) and record the DLQ row; with
        PostgreSQL unreachable, park the dead letter in Redis (`DlqFallback`)."""
        payload: dict[str, Any] = dict(envelope.payload)
        text = f"{type(error).__name__}: {error}"

        async def write() -> None:
            async with self._pool.acquire() as conn, transaction(conn, self._settings):
                await dead_letter_event(conn, payload, text, envelope.attempt)

        await self._fallback.record_for(
            write, envelope, source="payment_event", subject_key="event_id", error=text
        )
