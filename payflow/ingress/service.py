"""Landing provider events: address mapping, pending payment events and outbox rows.

The caller owns the transaction: every event of one delivery, its outbox row and any
unmatched record commit together, or nothing does.
"""

from __future__ import annotations

from enum import StrEnum
from uuid import UUID

import asyncpg

from payflow.db.queries import load_queries
from payflow.errors import BadInput, Conflict
from payflow.ingress.payloads import ProviderEvent
from payflow.ledger.accounts import asset_scale, record_event
from payflow.ledger.records import EventType
from payflow.money import InvalidAmount
from payflow.outbox.writer import enqueue

SQL = load_queries("payflow.ingress")
LEDGER_EVENT_TOPIC = "ledger.event"
RESERVED_PREFIXES = ("wd:", "alchemy:")


class IngressResult(StrEnum):
    RECORDED = "recorded"
    DUPLICATE = "duplicate"
    UNMATCHED = "unmatched"


async def record_and_announce(
    conn: asyncpg.Connection,
    *,
    event_id: str,
    account_id: UUID,
    amount: str,
    event_type: EventType,
    scale: int,
    trace_id: str,
) -> bool:
    """Store a pending payment event and, only when it is new, its `ledger.event` outbox row.

    Invariant: one outbox row per event id, ever; a duplicate writes nothing.
    """
    inserted = await record_event(
        conn,
        event_id=event_id,
        account_id=account_id,
        amount=amount,
        event_type=event_type,
        scale=scale,
        trace_id=trace_id,
    )
    if inserted:
        await enqueue(conn, LEDGER_EVENT_TOPIC, {"version": 1, "event_id": event_id}, trace_id)
    return inserted


async def _unmatched(
    conn: asyncpg.Connection, event: ProviderEvent, reason: str, trace_id: str
) -> IngressResult:
    await conn.execute(
        SQL["insert_unmatched"],
        event.event_id,
        reason,
        event.chain,
        event.to_address,
        event.asset,
        event.amount,
        event.tx_hash,
        event.raw,
        trace_id,
    )
    return IngressResult.UNMATCHED


async def land_event(
    conn: asyncpg.Connection, event: ProviderEvent, trace_id: str, *, strict_amount: bool
) -> IngressResult:
    """Map one provider event to its account and record it, or keep it as unmatched.

    `strict_amount` makes an amount the asset cannot hold an error (the generic format);
    otherwise such an event is kept for review (a provider must not retry forever).
    """
    if event.unsupported is not None or event.amount is None:
        return await _unmatched(conn, event, event.unsupported or "unsupported", trace_id)
    row = await conn.fetchrow(SQL["resolve_address"], event.chain, event.to_address)
    if row is None:
        return await _unmatched(conn, event, "unknown_address", trace_id)
    if event.asset != row["asset"]:
        return await _unmatched(conn, event, "asset_mismatch", trace_id)
    scale = await asset_scale(conn, row["asset"])
    try:
        inserted = await record_and_announce(
            conn,
            event_id=event.event_id,
            account_id=row["account_id"],
            amount=event.amount,
            event_type=event.event_type,
            scale=scale,
            trace_id=trace_id,
        )
    except InvalidAmount:
        if strict_amount:
            raise
        return await _unmatched(conn, event, "unsupported", trace_id)
    return IngressResult.RECORDED if inserted else IngressResult.DUPLICATE


def check_event_id(event_id: str) -> None:
    """Generic event ids may not squat on the namespaces payflow derives ids in."""
    if event_id.startswith(RESERVED_PREFIXES):
        raise BadInput("event_id must not start with a reserved prefix (wd:, alchemy:)")


async def assign_address(
    conn: asyncpg.Connection, chain: str, address: str, account_id: UUID
) -> asyncpg.Record:
    """Map (chain, address) to an account; `Conflict` when the address is taken."""
    try:
        row = await conn.fetchrow(SQL["assign_address"], chain, address, account_id)
    except asyncpg.UniqueViolationError:
        raise Conflict(f"address {address} is already assigned on {chain}") from None
    assert row is not None
    return row
