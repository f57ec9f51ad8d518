"""The dead-letter queue in PostgreSQL: recording and listing (`replay.py` replays).

A domain records its dead letters here under its source name (`SOURCES`); the rows are
read by the console, the API and `payflow dlq`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import BadInput, NotFound

SQL = load_queries("payflow.dlq")
SOURCES = ("payment_event", "payment", "webhook", "endpoint_delivery")
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
