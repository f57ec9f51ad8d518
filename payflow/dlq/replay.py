"""Audited manual replay of a dead letter, dispatched by its source.

Replay is manual only. It re-drives the original subject through the outbox under its
original idempotency (the event id, the payment id, the webhook id), so a replay can
never apply anything twice; each replay records who, when and what happened. The DLQ
knows no domain: each domain exports the replayer of its source (an async function
`(conn, subject_id) -> resolution text`, run inside the replay's transaction), and the
composition root passes the table (`payflow.ops.dlq_replay`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import asyncpg

from payflow.config import DatabaseSettings
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.dlq.records import SQL
from payflow.errors import BadInput, Conflict, NotFound

Replayer = Callable[[Connection, str], Awaitable[str]]


async def replay_dead_letter(
    pool: asyncpg.Pool,
    settings: DatabaseSettings,
    dlq_id: int,
    *,
    operator: str,
    replayers: Mapping[str, Replayer],
    reason: str = "",
) -> str:
    """Replay one DLQ row by hand through its source's replayer in `replayers`; returns
    the recorded resolution (with `reason`, the operator's why, appended as
    ``; reason: …`` when given, e.g. by the console).

    Invariant: in one transaction the row is locked, checked unresolved, its subject
    re-driven through the outbox (or found already done) and the audit columns set;
    a second replay of the same row is refused with `Conflict`; a source without a
    replayer is `BadInput`.
    """
    if not operator.strip():
        raise BadInput("replay needs an operator name (resolved_by)")
    async with pool.acquire() as conn, transaction(conn, settings):
        row = await conn.fetchrow(SQL["lock_dead_letter"], dlq_id)
        if row is None:
            raise NotFound(f"dead letter {dlq_id} does not exist")
        if row["resolved_at"] is not None:
            raise Conflict(f"dead letter {dlq_id} was already resolved")
        replayer = replayers.get(row["source"])
        if replayer is None:
            raise BadInput(f"no replayer for DLQ source {row['source']!r}")
        resolution = await replayer(conn, row["subject_id"])
        if reason.strip():
            resolution = f"{resolution}; reason: {reason.strip()[:500]}"
        await conn.fetchval(SQL["resolve_dead_letter"], dlq_id, operator.strip(), resolution)
    return resolution
