"""The dead-letter queue in PostgreSQL: recording, listing and audited manual replay.

Replay is manual only. It re-drives the original subject through the outbox under its
original idempotency (the event id, the payment id, the webhook id), so a replay can
never apply anything twice; each replay records who, when and what happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from payflow.broker.topology import TOPIC_LEDGER_EVENT, TOPIC_PAYMENT_CREATED, TOPIC_WEBHOOK_DELIVER
from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.errors import BadInput, Conflict, NotFound
from payflow.ledger.posting import posting_key
from payflow.ledger.states import EventStatus, reopen_failed
from payflow.ops.sweeps import clear_webhook_dead
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.ops")
SOURCES = ("payment_event", "payment", "webhook")
# The payload key under which a row moved from the Redis fallback keeps its entry id.
FALLBACK_MARK = "_dlq_fallback"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One `dead_letter_queue` row."""

    id: int
    source: str
    subject_id: str
    payload: dict[str, Any]
    error: str
    attempt: int
    created_at: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    resolution: str | None


def _dead_letter(row: asyncpg.Record) -> DeadLetter:
    return DeadLetter(**dict(row))


async def record_dead_letter(
    conn: Connection,
    *,
    source: str,
    subject_id: str,
    payload: dict[str, Any],
    error: str,
    attempt: int,
    fallback: Mapping[str, str] | None = None,
) -> int:
    """Insert one DLQ row inside the caller's transaction; every attempt keeps its own row.

    `fallback` (``{"entry_id", "failed_at"}``) is set only by the Redis DLQ drain: it is
    stored in the row's payload under `FALLBACK_MARK`, so the drain can tell an entry it
    already moved (`fallback_entry_recorded`) and an operator sees when it really failed.
    """
    if source not in SOURCES:
        raise BadInput(f"unknown DLQ source {source!r}")
    if fallback is not None:
        payload = {**payload, FALLBACK_MARK: dict(fallback)}
    dlq_id: int = await conn.fetchval(
        SQL["insert_dead_letter"], source, subject_id, payload, error[:2000], max(attempt, 1)
    )
    return dlq_id


async def fallback_entry_recorded(
    conn: Connection, source: str, subject_id: str, entry_id: str
) -> int | None:
    """The id of the DLQ row a Redis fallback entry became, if the drain moved it already."""
    dlq_id: int | None = await conn.fetchval(
        SQL["dead_letter_of_fallback_entry"], source, subject_id, entry_id
    )
    return dlq_id


async def list_dead_letters(
    pool: asyncpg.Pool, *, include_resolved: bool = False, limit: int = 50
) -> list[DeadLetter]:
    """Newest first; unresolved only unless `include_resolved`."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(SQL["list_dead_letters"], include_resolved, limit)
    return [_dead_letter(r) for r in rows]


async def get_dead_letter(pool: asyncpg.Pool, dlq_id: int) -> DeadLetter:
    """One DLQ row; `NotFound` when absent."""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(SQL["get_dead_letter"], dlq_id)
    if row is None:
        raise NotFound(f"dead letter {dlq_id} does not exist")
    return _dead_letter(row)


async def replay_dead_letter(
    pool: asyncpg.Pool, settings: DatabaseSettings, dlq_id: int, *, operator: str, reason: str = ""
) -> str:
    """Replay one DLQ row by hand; returns the recorded resolution (with `reason`, the
    operator's why, appended as ``; reason: …`` when given, e.g. by the console).

    Invariant: in one transaction the row is locked, checked unresolved, its subject
    re-driven through the outbox (or found already done) and the audit columns set;
    a second replay of the same row is refused with `Conflict`.
    """
    if not operator.strip():
        raise BadInput("replay needs an operator name (resolved_by)")
    async with pool.acquire() as conn, transaction(conn, settings):
        row = await conn.fetchrow(SQL["lock_dead_letter"], dlq_id)
        if row is None:
            raise NotFound(f"dead letter {dlq_id} does not exist")
        if row["resolved_at"] is not None:
            raise Conflict(f"dead letter {dlq_id} was already resolved")
        source: str = row["source"]
        subject: str = row["subject_id"]
        if source == "payment_event":
            resolution = await _replay_event(conn, subject)
        elif source == "payment":
            resolution = await _replay_payment(conn, subject, webhook=False)
        else:
            resolution = await _replay_payment(conn, subject, webhook=True)
        if reason.strip():
            resolution = f"{resolution}; reason: {reason.strip()[:500]}"
        await conn.fetchval(SQL["resolve_dead_letter"], dlq_id, operator.strip(), resolution)
    return resolution


async def _replay_event(conn: Connection, event_id: str) -> str:
    event = await conn.fetchrow(SQL["event_for_replay"], event_id)
    if event is None:
        return "skipped: event no longer exists"
    claim = await conn.fetchval(SQL["has_posting_claim"], posting_key(event_id))
    if claim is not None:
        return f"already applied: posting outcome {claim}; nothing replayed"
    status = EventStatus(event["status"])
    if status is EventStatus.FAILED and not await reopen_failed(conn, event_id):
        return "skipped: event could not be reopened"
    if status is EventStatus.CONFIRMED:
        return "already applied: event confirmed; nothing replayed"
    await enqueue(conn, TOPIC_LEDGER_EVENT, {"version": 1, "event_id": event_id}, event["trace_id"])
    return f"requeued: event {status} -> pending, ledger.event re-sent"


async def _replay_payment(conn: Connection, subject: str, *, webhook: bool) -> str:
    try:
        payment_id = UUID(subject)
    except ValueError:
        return "skipped: subject is not a payment id"
    payment = await conn.fetchrow(SQL["payment_for_replay"], payment_id)
    if payment is None:
        return "skipped: payment no longer exists"
    payload = {"version": 1, "payment_id": str(payment_id)}
    if not webhook:
        if payment["status"] != "pending":
            return f"already final: payment {payment['status']}; nothing replayed"
        await enqueue(conn, TOPIC_PAYMENT_CREATED, payload, payment["trace_id"])
        return "requeued: payment.created re-sent"
    if payment["webhook_delivered_at"] is not None:
        return "already delivered: nothing replayed"
    if payment["webhook_url"] is None:
        return "skipped: payment has no webhook URL"
    await clear_webhook_dead(conn, payment_id)
    await enqueue(conn, TOPIC_WEBHOOK_DELIVER, payload, payment["trace_id"])
    return "requeued: webhook.deliver re-sent with the same webhook-id"
